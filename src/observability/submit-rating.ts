import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type SubmitRatingRequest,
  type SubmitRatingResponse,
  SubmitRatingResponseSchema,
} from "../../gen/provision/v1/feedback_pb.js";
import { liveSessionOfCall } from "../licensing/live-session.js";
import { inTransaction } from "../platform/database.js";
import { invalidField } from "../platform/errors.js";
import { Violations } from "../platform/validation.js";
import type { RatingRow } from "./entities.js";
import type { ObservabilityDependencies } from "./observability-dependencies.js";
import { toRating } from "./rating-mapper.js";

/** The rating scale: 1 (worst) to 5 (best), a five-point Likert scale as app stores use. */
export const RATING_MIN = 1;
export const RATING_MAX = 5;
export const MAX_REMARK_LENGTH = 2000;

/** Stores a rating of a product (or one of its features) licensed to the caller's session; answers it. */
export async function submitRating(
  deps: ObservabilityDependencies,
  request: SubmitRatingRequest,
  context: HandlerContext,
): Promise<SubmitRatingResponse> {
  validate(request);
  const session = await liveSessionOfCall(deps.sessions, request.sessionId.toLowerCase(), context);
  const productId = request.productId.toLowerCase();
  const featureId = request.featureId.toLowerCase();
  const { ratings } = deps;
  const row = await inTransaction(deps.dataSource, async (manager) => {
    if (!(await ratings.isLicensedProduct(manager, session.entitlementId, productId))) {
      throw invalidField("productId", "is not a product licensed to this session");
    }
    const catalogFeatureId = featureId
      ? await ratings.catalogFeatureId(manager, session.entitlementId, productId, featureId)
      : null;
    if (featureId && !catalogFeatureId) throw invalidField("featureId", "is not a feature of the product");
    const rating: RatingRow = {
      id: deps.newId(),
      providerId: session.providerId,
      entitlementId: session.entitlementId,
      sessionId: session.sessionId,
      productId,
      featureId: catalogFeatureId,
      rating: request.rating,
      remark: request.remark === "" ? null : request.remark,
      createdAt: deps.clock.now(),
    };
    await ratings.ratings.insert(manager, [rating]);
    return rating;
  });
  return create(SubmitRatingResponseSchema, { rating: toRating(row) });
}

function validate(request: SubmitRatingRequest): void {
  const violations = new Violations()
    .required("sessionId", request.sessionId)
    .uuid("sessionId", request.sessionId)
    .required("productId", request.productId)
    .uuid("productId", request.productId)
    .uuid("featureId", request.featureId)
    .maxLength("remark", request.remark, MAX_REMARK_LENGTH);
  if (request.rating < RATING_MIN || request.rating > RATING_MAX) {
    violations.add("rating", `must be from ${RATING_MIN} (worst) to ${RATING_MAX} (best)`);
  }
  violations.throwIfAny();
}
