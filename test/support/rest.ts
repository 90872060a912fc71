export const PRODUCTS = "/api/v1/provision/admin/assets/products";

/** The Authorization each test server's `rest()` calls send by default (its bootstrap client's token). */
export const defaultAuthorization = new Map<string, string>();

export interface JsonResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/**
 * A REST call with fetch, authenticated as the server's bootstrap client unless `headers.authorization` is
 * given (an empty string sends none).: JSON in (as `application/json-patch+json`, the spec's declared type), JSON out.
 */
export async function rest<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonResponse<T>> {
  const authorization = "authorization" in headers ? headers.authorization : defaultAuthorization.get(baseUrl);
  const { authorization: _, ...others } = headers;
  const sent: Record<string, string> = { ...(authorization ? { authorization } : {}), ...others };
  const response = await fetch(baseUrl + path, {
    method,
    headers: body === undefined ? sent : { "content-type": "application/json-patch+json", ...sent },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}
