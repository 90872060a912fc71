/** The scope catalog: `<area>:<verb>`. Wildcards stand for a whole area or verb: `catalog:*`, `*:read`, `*`. */
export const SCOPE_AREAS = ["catalog", "entitlements", "usage", "reporting", "webhooks", "clients"] as const;
export const SCOPE_VERBS = ["read", "create", "update", "write", "delete"] as const;

/** `write` is the verb of operations that create and change at once (import, upsert); it covers both. */
const IMPLIED_VERBS: Record<string, string[]> = { write: ["create", "update"] };

export function isValidScope(scope: string): boolean {
  if (scope === "*") return true;
  const [area, verb, extra] = scope.split(":");
  if (extra !== undefined || verb === undefined) return false;
  const areaOk = area === "*" || (SCOPE_AREAS as readonly string[]).includes(area);
  const verbOk = verb === "*" || (SCOPE_VERBS as readonly string[]).includes(verb);
  return areaOk && verbOk;
}

/** Whether one granted scope (possibly with wildcards) covers a scope with wildcards or without. */
export function covers(granted: string, wanted: string): boolean {
  if (granted === "*" || granted === "*:*") return true;
  if (wanted === "*") return false;
  const [grantedArea, grantedVerb] = granted.split(":");
  const [wantedArea, wantedVerb] = wanted.split(":");
  const areaCovered = grantedArea === "*" || grantedArea === wantedArea;
  const verbCovered =
    grantedVerb === "*" || grantedVerb === wantedVerb || (IMPLIED_VERBS[grantedVerb] ?? []).includes(wantedVerb);
  return areaCovered && verbCovered;
}

export function anyCovers(granted: readonly string[], wanted: string): boolean {
  return granted.some((scope) => covers(scope, wanted));
}

export function parseScopeList(text: string): string[] {
  return [...new Set(text.split(/[\s,]+/).filter(Boolean))];
}
