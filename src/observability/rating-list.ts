import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type ListRatingsRequest,
  type ListRatingsResponse,
  ListRatingsResponseSchema,
} from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially } from "../platform/database.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { timeRange } from "../platform/time-range.js";
import { Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import type { ObservabilityReads } from "./observability-dependencies.js";
import { toRating } from "./rating-mapper.js";

/** The provider's ratings, newest first, with the average of every rating the filter selects. */
export async function listRatings(
  deps: ObservabilityReads,
  request: ListRatingsRequest,
  context: HandlerContext,
): Promise<ListRatingsResponse> {
  new Violations().uuid("productId", request.productId).uuid("featureId", request.featureId).throwIfAny();
  const page = resolvePage(request.pageNumber, request.pageSize);
  const range = timeRange(request.from, request.to);
  const { dataSource, ratings } = deps;
  const { rows, count, sum } = await readSerially(dataSource, () =>
    ratings.page(dataSource.manager, {
      providerId: providerOf(context),
      productId: request.productId.toLowerCase(),
      featureId: request.featureId.toLowerCase(),
      ...range,
      offset: page.offset,
      limit: page.pageSize,
    }),
  );
  return create(ListRatingsResponseSchema, {
    ...pageInfo(page, count, rows.length),
    items: rows.map(toRating),
    averageRating: count > 0 ? sum / count : 0,
  });
}
