import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { DomainError } from "../platform/errors.js";

/** The provider that owned every row before providers existed; the bootstrap provider. */
export const DEFAULT_PROVIDER_ID = "00000000-0000-4000-8000-000000000000";

/** The caller's provider, set by the auth interceptor from the caller's credential. */
export const providerIdKey = createContextKey<string>("", { description: "owning provider" });

/** The caller's provider; fails closed when no credential named one. */
export function providerOf(context: HandlerContext): string {
  const providerId = context.values.get(providerIdKey);
  if (!providerId) throw new DomainError("internal", "no provider in the request context");
  return providerId;
}
