import type { HandlerContext } from "@connectrpc/connect";
import { DomainError } from "../platform/errors.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";

// Placeholder until implemented: each answers unimplemented.
export async function createEntitlement(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "createEntitlement is not implemented yet", { slug: "unimplemented" });
}

export async function getEntitlement(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "getEntitlement is not implemented yet", { slug: "unimplemented" });
}

export async function listEntitlements(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "listEntitlements is not implemented yet", { slug: "unimplemented" });
}

export async function updateEntitlement(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "updateEntitlement is not implemented yet", { slug: "unimplemented" });
}

export async function convertToTemplate(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "convertToTemplate is not implemented yet", { slug: "unimplemented" });
}

export async function createFromTemplate(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "createFromTemplate is not implemented yet", { slug: "unimplemented" });
}

export async function setActivationEnabled(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "setActivationEnabled is not implemented yet", { slug: "unimplemented" });
}

export async function setClaimBasedSeats(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "setClaimBasedSeats is not implemented yet", { slug: "unimplemented" });
}

export async function setSubscriptionActive(
  _deps: LicensingDependencies,
  _request: unknown,
  _context: HandlerContext,
): Promise<never> {
  throw new DomainError("unimplemented", "setSubscriptionActive is not implemented yet", { slug: "unimplemented" });
}
