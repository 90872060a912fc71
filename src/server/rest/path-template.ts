/** One `google.api.http` path template: literal segments and `{field}` / `{field=*}` variables. */
export interface PathTemplate {
  text: string;
  segments: Segment[];
}

type Segment = { kind: "literal"; value: string } | { kind: "variable"; field: string };

export function parsePathTemplate(text: string): PathTemplate {
  if (!text.startsWith("/")) throw new Error(`path template ${text} must start with /`);
  const segments = text
    .slice(1)
    .split("/")
    .map((part): Segment => {
      const variable = /^\{([a-z_][a-z0-9_.]*)(?:=\*)?\}$/.exec(part);
      if (variable) return { kind: "variable", field: variable[1] };
      if (/[{}*:]/.test(part) || part === "")
        throw new Error(`path template ${text} has an unsupported segment ${part}`);
      return { kind: "literal", value: part };
    });
  return { text, segments };
}

/** The variables bound by `path`, or undefined when it does not match. Variable values are URL-decoded. */
export function matchPathTemplate(template: PathTemplate, pathParts: string[]): Record<string, string> | undefined {
  const { segments } = template;
  if (pathParts.length !== segments.length) return undefined;
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index];
    const part = pathParts[index];
    if (segment.kind === "literal" ? part !== segment.value : part === "") return undefined;
  }
  const variables: Record<string, string> = {};
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index];
    if (segment.kind === "literal") continue;
    const part = pathParts[index];
    if (!part.includes("%")) {
      variables[segment.field] = part;
      continue;
    }
    try {
      variables[segment.field] = decodeURIComponent(part);
    } catch {
      return undefined;
    }
  }
  return variables;
}

/** Orders templates so that, at the first segment where two differ, a literal comes before a variable. */
export function compareSpecificity(a: PathTemplate, b: PathTemplate): number {
  const length = Math.min(a.segments.length, b.segments.length);
  for (let index = 0; index < length; index++) {
    const left = a.segments[index].kind;
    const right = b.segments[index].kind;
    if (left !== right) return left === "literal" ? -1 : 1;
  }
  return a.segments.length - b.segments.length;
}
