/** Client credentials for `client_secret_post`; answers the token endpoint's status and JSON body. */
export async function requestToken(
  baseUrl: string,
  clientId: string,
  clientSecret: string,
  scope?: string,
): Promise<{ status: number; body: any; headers: Headers }> {
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: clientId,
    client_secret: clientSecret,
  });
  if (scope !== undefined) form.set("scope", scope);
  const response = await fetch(`${baseUrl}/auth/connect/token`, { method: "POST", body: form });
  return { status: response.status, body: await response.json(), headers: response.headers };
}

/** An access token, failing loudly when the token endpoint refuses. */
export async function accessToken(baseUrl: string, clientId: string, clientSecret: string, scope?: string) {
  const { status, body } = await requestToken(baseUrl, clientId, clientSecret, scope);
  if (status !== 200) throw new Error(`token endpoint answered ${status}: ${JSON.stringify(body)}`);
  return body.access_token as string;
}
