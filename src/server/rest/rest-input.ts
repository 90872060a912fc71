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

/** The request message as JSON, from the body, the query and the path variables, as the route binds them. */
export async function readInput(
  request: NodeRequest,
  route: RestRoute,
  url: URL,
  variables: Record<string, string>,
  bodyLimitBytes: number,
): Promise<RestInput> {
  const json: JsonObject = {};
  const input = route.rpc.input;
  if (route.body) {
    const body = await readJsonBody(request, bodyLimitBytes);
    if ("problem" in body) return body;
    if (body.json !== undefined) {
      if (route.body === "*") {
        if (typeof body.json !== "object" || body.json === null || Array.isArray(body.json)) {
          return { problem: { status: 400, slug: "malformed-json", detail: "the body must be a JSON object" } };
        }
        Object.assign(json, body.json);
      } else {
        const field = input.fields.find((candidate) => candidate.name === route.body);
        if (field && body.json !== null) json[field.jsonName] = body.json;
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

async function readJsonBody(
  request: NodeRequest,
  limit: number,
): Promise<{ json: JsonValue | undefined } | RequestProblem> {
  const encoding = String(request.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
  if (encoding !== "identity") {
    return problem(
      415,
      "unsupported-content-encoding",
      `send the body uncompressed; content-encoding ${encoding} is not supported`,
    );
  }
  let bytes: Buffer;
  try {
    bytes = await getRawBody(request as NodeJS.ReadableStream, { limit, length: request.headers["content-length"] });
  } catch (error) {
    return bodyProblem(error as getRawBody.RawBodyError, limit);
  }
  if (bytes.length === 0) return { json: undefined };
  const mediaType = mediaTypeOf(request.headers["content-type"]);
  if (!JSON_CONTENT_TYPES.has(mediaType)) {
    return problem(
      415,
      "unsupported-media-type",
      `send the body as application/json or application/json-patch+json, not ${mediaType || "no content type"}`,
    );
  }
  try {
    // TextDecoder drops a leading byte-order mark, which some Windows clients send.
    return { json: parseJsonExactIntegers(new TextDecoder().decode(bytes)) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : "malformed";
    return problem(400, "malformed-json", `the body is not valid JSON: ${reason}`);
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
