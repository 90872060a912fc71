import type { HandlerContext } from "@connectrpc/connect";
import { DomainError } from "../platform/errors.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";

// Placeholder until implemented: each answers unimplemented.
export async function createActivationCode(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "createActivationCode is not implemented yet", { slug: "unimplemented" });
}

export async function listActivationCodes(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "listActivationCodes is not implemented yet", { slug: "unimplemented" });
}

export async function deleteActivationCode(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "deleteActivationCode is not implemented yet", { slug: "unimplemented" });
}
