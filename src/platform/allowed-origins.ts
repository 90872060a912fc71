/** The origins browsers may call from: "*" for any. */
export type AllowedOrigins = "*" | ReadonlySet<string>;

/**
 * CORS_ALLOWED_ORIGINS as origins (`scheme://host[:port]`, lower-cased as browsers send them), or "*"; undefined
 * when unset. Throws a message naming the entry that is not an origin.
 */
export function parseAllowedOrigins(value: string | undefined): AllowedOrigins | undefined {
  const entries = value
    ?.split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (!entries?.length) return undefined;
  if (entries.length === 1 && entries[0] === "*") return "*";
  const origins = new Set<string>();
  for (const entry of entries) {
    const origin = originOf(entry);
    if (!origin) throw new Error(`has ${JSON.stringify(entry)}, not an origin such as https://console.example.com`);
    origins.add(origin);
  }
  return origins;
}

function originOf(entry: string): string | undefined {
  try {
    const url = new URL(entry);
    const bare = `${url.protocol}//${url.host}`;
    const sameText = entry.toLowerCase().replace(/\/$/, "") === bare;
    return (url.protocol === "https:" || url.protocol === "http:") && sameText ? bare : undefined;
  } catch {
    return undefined;
  }
}
