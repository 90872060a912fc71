import test from "ava";
import { jsonText } from "../../src/platform/json-text.js";

const SAMPLES = [
  "",
  "/api/v1/provision/activations/sessions/0f8fad5b-d9cb-469f-a165-70867728950e/check-in",
  "0f8fad5b-d9cb-469f-a165-70867728950e",
  'a "quoted" path',
  "back\\slash",
  "tab\there",
  "line\nbreak",
  "\u0000\u001f\u007f",
  "é ü 中文 \u2028\u2029",
  "emoji 😀 paired",
  "lone \ud800 high",
  "lone \udfff low",
  "reversed \udc00\ud800 pair",
];

test("jsonText writes every string exactly as JSON.stringify does", (t) => {
  for (const sample of SAMPLES) t.is(jsonText(sample), JSON.stringify(sample), JSON.stringify(sample));
  for (let code = 0; code < 0x10000; code++) {
    const text = `x${String.fromCharCode(code)}y`;
    if (jsonText(text) !== JSON.stringify(text)) t.fail(`code unit ${code.toString(16)}`);
  }
  t.pass();
});
