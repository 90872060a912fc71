import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { invalidField } from "./errors.js";
import { requireStorableDate } from "./timestamps.js";

/** A list filter's `from` (inclusive) and `to` (exclusive); `to` must come after `from` when both are given. */
export function timeRange(from?: Timestamp, to?: Timestamp): { from: Date | null; to: Date | null } {
  const range = {
    from: from ? requireStorableDate("from", from) : null,
    to: to ? requireStorableDate("to", to) : null,
  };
  if (range.from && range.to && range.to <= range.from) throw invalidField("to", "must be after from");
  return range;
}
