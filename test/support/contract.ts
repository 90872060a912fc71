import { randomUUID } from "node:crypto";
import { type DescMethod, getOption, ScalarType } from "@bufbuild/protobuf";
import { AuthMode, auth } from "../../gen/provision/v1/auth_pb.js";
import type { ServiceImplementation } from "../../src/server/in-process-rpc.js";
import { routesFromAnnotations } from "../../src/server/rest/route-table.js";
import { ALL_SERVICES } from "../../src/services.js";

/** Services with an implementation; the others are registered empty and answer `unimplemented` (501). */
export const IMPLEMENTED_SERVICES = new Set([
  "provision.v1.CatalogService",
  "provision.v1.ClientAdminService",
  "provision.v1.EntitlementService",
  "provision.v1.WebhookService",
  "provision.v1.UsageAdminService",
]);

/** Withholds one RPC's implementation: the server answers it `unimplemented`, as it would one not built yet. */
export function withholding(serviceTypeName: string, method: string) {
  return (implementations: ServiceImplementation[]): ServiceImplementation[] =>
    implementations.map(([service, impl]) => {
      if (service.typeName !== serviceTypeName) return [service, impl];
      const { [method]: _withheld, ...others } = impl as Record<string, unknown>;
      return [service, others];
    });
}

/** A REST route of the contract that takes client credentials, with its path variables filled in. */
export interface ClientRoute {
  /** `POST /api/v1/…/{product_id}`, for test titles. */
  name: string;
  method: string;
  /** The path with every variable filled (a random UUID, or `true` for a bool). */
  path: string;
  /** An empty body of the route's shape (`[]` for a repeated body field, else `{}`), or undefined. */
  body: Record<string, never> | never[] | undefined;
  /** The scope the route's RPC declares. */
  scope: string;
  rpc: DescMethod;
}

/** The RPCs of every service whose declared credential is an OAuth client's access token. */
export function clientMethods(): { rpc: DescMethod; scope: string }[] {
  return ALL_SERVICES.flatMap((service) => service.methods)
    .map((rpc) => ({ rpc, requirement: getOption(rpc, auth) }))
    .filter(({ requirement }) => requirement.mode === AuthMode.CLIENT)
    .map(({ rpc, requirement }) => ({ rpc, scope: requirement.scope }));
}

/** Every REST route whose RPC declares `AUTH_MODE_CLIENT`, read from the contract's annotations. */
export function clientRoutes(): ClientRoute[] {
  return routesFromAnnotations(ALL_SERVICES)
    .map((route) => ({ route, requirement: getOption(route.rpc, auth) }))
    .filter(({ requirement }) => requirement.mode === AuthMode.CLIENT)
    .map(({ route, requirement }) => {
      const parts = route.template.segments.map((segment) => {
        if (segment.kind === "literal") return segment.value;
        const field = route.rpc.input.fields.find((candidate) => candidate.name === segment.field);
        return field?.fieldKind === "scalar" && field.scalar === ScalarType.BOOL ? "true" : randomUUID();
      });
      const bodyField = route.rpc.input.fields.find((candidate) => candidate.name === route.body);
      return {
        name: `${route.httpMethod} ${route.template.text}`,
        method: route.httpMethod,
        path: `/${parts.join("/")}`,
        body: route.body ? (bodyField?.fieldKind === "list" ? [] : {}) : undefined,
        scope: requirement.scope,
        rpc: route.rpc,
      };
    });
}

export const SCOPE_AREAS = ["catalog", "entitlements", "usage", "reporting", "webhooks", "clients"];
export const SCOPE_VERBS = ["read", "create", "update", "write", "delete"];

/**
 * Every concrete scope of the catalog that does not grant `needed`: the same area with other verbs and the
 * same verb in other areas. `write` grants `create` and `update`, so it is left out for those.
 */
export function nearMissScopes(needed: string): string[] {
  const [area, verb] = needed.split(":");
  const grants = (candidateVerb: string) =>
    candidateVerb === verb || (candidateVerb === "write" && (verb === "create" || verb === "update"));
  return SCOPE_AREAS.flatMap((candidateArea) =>
    SCOPE_VERBS.filter((candidateVerb) => candidateArea !== area || !grants(candidateVerb)).map(
      (candidateVerb) => `${candidateArea}:${candidateVerb}`,
    ),
  );
}
