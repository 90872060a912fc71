import type { Clock } from "../platform/clock.js";
import type { CatalogRepository } from "./catalog-repository.js";
import type { ProductCache } from "./product-cache.js";

export interface CatalogDependencies {
  repository: CatalogRepository;
  /** GetProduct's answers; every write that changes a product tells it once committed. */
  products: ProductCache;
  clock: Clock;
  newId: () => string;
}

/** What the rows a write makes need: the time and new ids. */
export type IdsAndClock = Pick<CatalogDependencies, "clock" | "newId">;
