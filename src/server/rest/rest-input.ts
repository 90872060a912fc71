import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { parse as parseContentType } from "content-type";
import getRawBody from "raw-body";
import type { Problem } from "../http-responses.js";
import { fieldByJsonKey, jsonFromText } from "./json-codec.js";
import { parseJsonExactIntegers } from "./lossless-json.js";
import type { NodeRequest } from "./rest-handler.js";
import type { RestRoute } from "./route-table.js";

const JSON_CONTENT_TYPES = new Set(["application/json", "application/json-patch+json"]);

type RequestProblem = { problem: Omit<Problem, "instance"> };
export type RestInput = { json: JsonObject } | RequestProblem;
/** A request's body as it arrived; read once, whoever reads it first. */
export type RequestBody = { bytes: Buffer } | RequestProblem;

/**
 * The request message as JSON, from the body (`body` when it was read already), the query and the path
 * variables, as the route binds them.
 */
export async function readInput(
  request: NodeRequest,
  route: RestRoute,
  url: URL,
  variables: Record<string, string>,
  bodyLimitBytes: number,
  body?: RequestBody,
): Promise<RestInput> {
  const json: JsonObject = {};
  const input = route.rpc.input;
  if (route.body) {
    const read = body ?? (await readBody(request, bodyLimitBytes));
    const parsed = "problem" in read ? read : jsonOfBody(request, read.bytes);
    if ("problem" in parsed) return parsed;
    if (parsed.json !== undefined) {
      if (route.body === "*") {
        if (typeof parsed.json !== "object" || parsed.json === null || Array.isArray(parsed.json)) {
          return { problem: { status: 400, slug: "malformed-json", detail: "the body must be a JSON object" } };
        }
        Object.assign(json, parsed.json);
      } else {
        const field = input.fields.find((candidate) => candidate.name === route.body);
        if (field && parsed.json !== null) json[field.jsonName] = parsed.json;
      }
    }
  }
  if (route.body !== "*" && url.search) {
    const bodyField = input.fields.find((candidate) => candidate.name === route.body);
    for (const key of new Set(url.searchParams.keys())) {
      const path = key.split(".");
      const field = fieldByJsonKey(input, path[0]);
      if (!field || field === bodyField || path.length > 1) continue;
      const values = url.searchParams.getAll(key).map((text) => jsonFromText(field, text));
      json[field.jsonName] = field.fieldKind === "list" ? values : values[values.length - 1];
    }
  }
  for (const name in variables) {
    const field = input.fields.find((candidate) => candidate.name === name);
    if (field) json[field.jsonName] = jsonFromText(field, variables[name]);
  }
  return { json };
}

/** The request's `Content-Encoding`, lower-cased; `identity` when none is sent. */
export function contentEncodingOf(request: NodeRequest): string {
  return String(request.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
}

/** The body's bytes, uncompressed and within `limit`; a problem otherwise. */
export async function readBody(request: NodeRequest, limit: number): Promise<RequestBody> {
  const encoding = contentEncodingOf(request);
  if (encoding !== "identity") {
    return problem(
      415,
      "unsupported-content-encoding",
      `send the body uncompressed; content-encoding ${encoding} is not supported`,
    );
  }
  try {
    const length = request.headers["content-length"];
    return { bytes: await getRawBody(request as NodeJS.ReadableStream, { limit, length }) };
  } catch (error) {
    return bodyProblem(error as getRawBody.RawBodyError, limit);
  }
}

/** The most an empty-looking body (`{}` with white space) may take. */
const SMALL_BODY_BYTES = 64;
const NO_BYTES = Buffer.alloc(0);

/**
 * The body of an HTTP/1.x request declaring a plain body of at most 64 bytes (or none, answered at once), read
 * without raw-body's checks, which such a body cannot fail; undefined, and the body left unread, for any other
 * request.
 */
export function readSmallBody(request: NodeRequest): Buffer | Promise<Buffer> | undefined {
  const { headers } = request;
  if (request.httpVersionMajor !== 1 || headers["content-encoding"] !== undefined) return undefined;
  if (headers["transfer-encoding"] !== undefined) return undefined;
  const length = Number(headers["content-length"] ?? 0);
  if (length === 0) return NO_BYTES;
  if (!(length <= SMALL_BODY_BYTES)) return undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    request.once("error", reject);
    request.once("close", () => {
      if (!request.complete) reject(new Error("the request closed before its body arrived"));
    });
  });
}

/** A body that says nothing: empty, or an empty JSON object sent as JSON. */
export function isEmptyBody(request: NodeRequest, bytes: Buffer): boolean {
  if (bytes.length === 0) return true;
  if (bytes.length > 64 || !isUtf8Json(request.headers["content-type"])) return false;
  return /^\s*\{\s*\}\s*$/.test(bytes.toString("utf8"));
}

/** Whether the content type is JSON in UTF-8 (named, or by default). */
function isUtf8Json(header: string | undefined): boolean {
  if (!JSON_CONTENT_TYPES.has(mediaTypeOf(header))) return false;
  const charset = charsetOf(header);
  return charset === undefined || UTF8_CHARSETS.has(charset);
}

function jsonOfBody(request: NodeRequest, bytes: Buffer): { json: JsonValue | undefined } | RequestProblem {
  if (bytes.length === 0) return { json: undefined };
  const mediaType = mediaTypeOf(request.headers["content-type"]);
  if (!JSON_CONTENT_TYPES.has(mediaType)) {
    return problem(
      415,
      "unsupported-media-type",
      `send the body as application/json or application/json-patch+json, not ${mediaType || "no content type"}`,
    );
  }
  const charset = charsetOf(request.headers["content-type"]);
  if (charset !== undefined && !UTF8_CHARSETS.has(charset)) {
    return problem(415, "unsupported-media-type", `send JSON as UTF-8 (RFC 8259), not ${charset}`);
  }
  let text: string;
  try {
    // The decoder drops a leading byte-order mark, which some Windows clients send.
    text = UTF8.decode(bytes);
  } catch {
    return problem(400, "malformed-json", "the body is not valid UTF-8");
  }
  try {
    return { json: parseJsonExactIntegers(text) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : "malformed";
    return problem(400, "malformed-json", `the body is not valid JSON: ${reason}`);
  }
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const UTF8_CHARSETS = new Set(["utf-8", "utf8", "us-ascii"]);

/** The charset the content type names, lower-cased; undefined when it names none (or cannot be read). */
function charsetOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  try {
    return parseContentType(header).parameters.charset?.toLowerCase();
  } catch {
    return undefined;
  }
}

function mediaTypeOf(header: string | undefined): string {
  if (!header) return "";
  try {
    return parseContentType(header).type;
  } catch {
    return header.split(";")[0].trim().toLowerCase();
  }
}

function bodyProblem(error: getRawBody.RawBodyError, limit: number): RequestProblem {
  if (error.type === "entity.too.large") return problem(413, "body-too-large", `the body exceeds ${limit} bytes`);
  if (error.type === "request.size.invalid") {
    return problem(400, "malformed-request", "the body is shorter or longer than its Content-Length");
  }
  throw error;
}

function problem(status: number, slug: string, detail: string): RequestProblem {
  return { problem: { status, slug, detail } };
}
