import type { ServiceImpl } from "@connectrpc/connect";
import type { FeedbackService } from "../../gen/provision/v1/feedback_pb.js";
import type { ObservabilityDependencies } from "./observability-dependencies.js";
import { submitRating } from "./submit-rating.js";

/** FeedbackService: each RPC handed to its named function. */
export function createFeedbackService(deps: ObservabilityDependencies): ServiceImpl<typeof FeedbackService> {
  return {
    submitRating: (request, context) => submitRating(deps, request, context),
  };
}
