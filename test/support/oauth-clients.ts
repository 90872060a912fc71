import { rest } from "./rest.js";

export const CLIENTS = "/api/v1/provision/admin/clients";

/** A new OAuth client made through the admin API as the server's bootstrap client. */
export async function createClient(
  baseUrl: string,
  scopes: string[],
  name = "test client",
): Promise<{ clientId: string; clientSecret: string }> {
  const { status, body } = await rest(baseUrl, "POST", CLIENTS, { name, scopes });
  if (status !== 200) throw new Error(`creating a client answered ${status}: ${JSON.stringify(body)}`);
  return { clientId: body.client.clientId, clientSecret: body.clientSecret };
}

/** HTTP Basic credentials as RFC 6749 §2.3.1 has them: id and secret form-urlencoded, then base64. */
export function basicCredentials(clientId: string, clientSecret: string): string {
  const encode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`).toString("base64")}`;
}

/** POSTs `form` to the token endpoint as application/x-www-form-urlencoded, with extra headers. */
export async function postToken(
  baseUrl: string,
  form: Record<string, string> | URLSearchParams,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const response = await fetch(`${baseUrl}/auth/connect/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form instanceof URLSearchParams ? form.toString() : new URLSearchParams(form).toString(),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}
