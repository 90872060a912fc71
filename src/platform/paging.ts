import { Violations } from "./validation.js";

export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;

export interface PageRequest {
  page: number;
  pageSize: number;
  offset: number;
}

/** The page a list request asks for: 1-based `pageNumber` (0 means 1), `pageSize` 0 means the default. */
export function resolvePage(pageNumber: number, pageSize: number): PageRequest {
  const violations = new Violations();
  if (pageNumber < 0) violations.add("pageNumber", "must be 1 or more");
  if (pageSize < 0 || pageSize > PAGE_SIZE_MAX) violations.add("pageSize", `must be between 1 and ${PAGE_SIZE_MAX}`);
  violations.throwIfAny();
  const page = pageNumber || 1;
  const size = pageSize || PAGE_SIZE_DEFAULT;
  return { page, pageSize: size, offset: (page - 1) * size };
}

/** The paged-list fields of the spec for a page holding `count` of `total` items. */
export function pageInfo(request: PageRequest, total: number, count: number) {
  const totalPages = Math.ceil(total / request.pageSize);
  const from = count > 0 ? request.offset + 1 : 0;
  return {
    currentPage: request.page,
    pageSize: request.pageSize,
    totalCount: total,
    totalPages,
    from,
    to: count > 0 ? from + count - 1 : 0,
    hasPreviousPage: request.page > 1,
    hasNextPage: request.page < totalPages,
  };
}
