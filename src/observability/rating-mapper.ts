import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Rating, RatingSchema } from "../../gen/provision/v1/feedback_pb.js";
import type { RatingRow } from "./entities.js";

export function toRating(row: RatingRow): Rating {
  return create(RatingSchema, {
    id: row.id,
    sessionId: row.sessionId,
    productId: row.productId,
    featureId: row.featureId ?? "",
    rating: row.rating,
    remark: row.remark ?? "",
    createdAt: timestampFromDate(row.createdAt),
  });
}
