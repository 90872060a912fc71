/** A request target read for dispatch: its path, and the WHATWG URL when one was needed to read it. */
export interface RequestTarget {
  path: string;
  url?: URL;
}

const BASE = "http://service.invalid";
/** Origin-form paths whose WHATWG pathname is the path itself: nothing to percent-encode, no dot segments. */
const PLAIN_PATH = /^\/(?!\/)[\w\-.~!$&'()*+,;=:@/]*$/;
const DOT_SEGMENT = /\/\.\.?(?:\/|$)/;

/**
 * Reads the path of a request target without building a URL when the path is plain; undefined for targets
 * Node's parser lets through but WHATWG URL refuses.
 */
export function readTarget(target = "/"): RequestTarget | undefined {
  const query = target.indexOf("?");
  const path = query < 0 ? target : target.slice(0, query);
  if (PLAIN_PATH.test(path) && !DOT_SEGMENT.test(path)) return { path };
  try {
    const url = new URL(target, BASE);
    return { path: url.pathname, url };
  } catch {
    return undefined;
  }
}

/** The target as a URL, built only for the handlers that read the query. */
export function targetUrl(target: RequestTarget, raw = "/"): URL {
  return target.url ?? new URL(raw, BASE);
}
