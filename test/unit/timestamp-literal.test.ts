import { toBinary } from "@bufbuild/protobuf";
import { TimestampSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { timestampLiteral } from "../../src/platform/timestamps.js";

const INSTANTS = [0, 1, 999, 1_000, 1_764_000_000_123, -1, -999, -1_001, Date.UTC(9999, 11, 31, 23, 59, 59, 999)];

test("a literal Timestamp is the message timestampFromDate creates, to the byte", (t) => {
  for (const ms of INSTANTS) {
    const created = timestampFromDate(new Date(ms));
    const literal = timestampLiteral(new Date(ms));
    t.deepEqual(literal, created, `at ${ms} ms`);
    t.deepEqual(toBinary(TimestampSchema, literal), toBinary(TimestampSchema, created), `at ${ms} ms`);
  }
});
