import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ActivateJwtResponseSchema,
  ActivateLicenseResponseSchema,
  type ActivationService,
} from "../../gen/provision/v1/activation_pb.js";
import { activate } from "./activation.js";
import { checkInSession, releaseSession, renewSession, type SessionCallDependencies } from "./session-calls.js";

/** ActivationService: each RPC handed to its named function. */
export function createActivationService(deps: SessionCallDependencies): ServiceImpl<typeof ActivationService> {
  return {
    activateLicense: async (request, context) =>
      create(ActivateLicenseResponseSchema, { license: await activate(deps, request, context) }),
    activateJwt: async (request, context) =>
      create(ActivateJwtResponseSchema, { licenseToken: (await activate(deps, request, context)).licenseToken }),
    renewSession: (request, context) => renewSession(deps, request, context),
    checkInSession: (request, context) => checkInSession(deps, request, context),
    releaseSession: (request, context) => releaseSession(deps, request, context),
  };
}
