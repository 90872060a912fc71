import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { invalidField } from "../platform/errors.js";

/** A list filter's `from` (inclusive) and `to` (exclusive); `to` must come after `from` when both are given. */
export function timeRange(from?: Timestamp, to?: Timestamp): { from: Date | null; to: Date | null } {
  const range = { from: from ? timestampDate(from) : null, to: to ? timestampDate(to) : null };
  if (range.from && range.to && range.to <= range.from) throw invalidField("to", "must be after from");
  return range;
}
