import type { HandlerContext } from "@connectrpc/connect";
import { DomainError } from "../platform/errors.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";

// Placeholder until implemented: each answers unimplemented.
export async function listSessions(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "listSessions is not implemented yet", { slug: "unimplemented" });
}

export async function endSession(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "endSession is not implemented yet", { slug: "unimplemented" });
}
