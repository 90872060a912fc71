import type { Clock } from "../platform/clock.js";
import type { IdentityRepository } from "./identity-repository.js";

export interface ClientAdminDependencies {
  identity: IdentityRepository;
  clock: Clock;
  newId: () => string;
}
