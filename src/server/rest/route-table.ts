import { type DescMethod, type DescService, getOption } from "@bufbuild/protobuf";
import { http } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import { compareSpecificity, matchPathTemplate, type PathTemplate, parsePathTemplate } from "./path-template.js";

export interface RestRoute {
  httpMethod: string;
  template: PathTemplate;
  rpc: DescMethod;
  /** `*`, a request field name, or empty when the request has no body. */
  body: string;
  /** A response field to answer instead of the whole response message, or empty. */
  responseBody: string;
}

export type RouteMatch =
  | { kind: "found"; route: RestRoute; variables: Record<string, string> }
  | { kind: "method-not-allowed"; allowed: string[] }
  | { kind: "not-found" };

/** Every REST route of `services`, read from the methods' `google.api.http` annotations. */
export function routesFromAnnotations(services: DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const rpc of service.methods) {
      const rule = getOption(rpc, http);
      if (!rule.pattern.case) continue;
      if (rpc.methodKind !== "unary") throw new Error(`${rpc.parent.typeName}.${rpc.name}: REST needs a unary RPC`);
      for (const binding of [rule, ...rule.additionalBindings]) routes.push(routeOf(rpc, binding));
    }
  }
  return routes;
}

function routeOf(rpc: DescMethod, rule: HttpRule): RestRoute {
  const { pattern } = rule;
  if (pattern.case === undefined) throw new Error(`${rpc.name}: additional binding without a pattern`);
  const [httpMethod, path] =
    pattern.case === "custom"
      ? [pattern.value.kind.toUpperCase(), pattern.value.path]
      : [pattern.case.toUpperCase(), pattern.value];
  const template = parsePathTemplate(path);
  for (const segment of template.segments) {
    if (segment.kind === "variable" && !rpc.input.fields.some((field) => field.name === segment.field)) {
      throw new Error(`${rpc.name}: path variable {${segment.field}} is not a field of ${rpc.input.typeName}`);
    }
  }
  if (rule.body && rule.body !== "*" && !rpc.input.fields.some((field) => field.name === rule.body)) {
    throw new Error(`${rpc.name}: body ${rule.body} is not a field of ${rpc.input.typeName}`);
  }
  if (rule.responseBody && !rpc.output.fields.some((field) => field.name === rule.responseBody)) {
    throw new Error(`${rpc.name}: response_body ${rule.responseBody} is not a field of ${rpc.output.typeName}`);
  }
  return { httpMethod, template, rpc, body: rule.body, responseBody: rule.responseBody };
}

export class RouteTable {
  readonly size: number;
  /** The routes by their number of segments (only a template of as many can match a path), most specific first. */
  private readonly bySegments = new Map<number, RestRoute[]>();

  constructor(routes: RestRoute[]) {
    this.size = routes.length;
    for (const route of [...routes].sort((a, b) => compareSpecificity(a.template, b.template))) {
      const count = route.template.segments.length;
      this.bySegments.set(count, [...(this.bySegments.get(count) ?? []), route]);
    }
  }

  match(httpMethod: string, path: string): RouteMatch {
    const parts = path.slice(1).split("/");
    let allowed: Set<string> | undefined;
    for (const route of this.bySegments.get(parts.length) ?? []) {
      const variables = matchPathTemplate(route.template, parts);
      if (!variables) continue;
      if (route.httpMethod === httpMethod) return { kind: "found", route, variables };
      allowed ??= new Set();
      allowed.add(route.httpMethod);
    }
    return allowed ? { kind: "method-not-allowed", allowed: [...allowed].sort() } : { kind: "not-found" };
  }
}
