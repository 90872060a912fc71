import test from "ava";
import { isMariaDb, shareSkipLockedOn } from "../../src/platform/database.js";

test("the server's flavour is read from VERSION()", (t) => {
  t.true(isMariaDb("10.11.19-MariaDB-0+deb12u1"));
  t.true(isMariaDb("11.4.2-MariaDB"));
  t.false(isMariaDb("8.0.36"));
  t.false(isMariaDb("8.4.0-commercial"));
});

test("a share lock passing over held rows is spelled as each server reads it", (t) => {
  t.is(shareSkipLockedOn("mariadb"), " LOCK IN SHARE MODE SKIP LOCKED");
  t.is(shareSkipLockedOn("mysql"), " FOR SHARE SKIP LOCKED");
});
