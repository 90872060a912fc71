import type { AccessTokens } from "../auth/access-tokens.js";
import type { ClientState, ClientStates } from "../auth/client-states.js";
import { setNewest } from "../platform/bounded-map.js";
import type { Clock } from "../platform/clock.js";
import type { Logger } from "../platform/logger.js";

/** The delivery header carrying the token. */
export const CALLBACK_TOKEN_HEADER = "webhook-callback-token";
/** Default of `WEBHOOK_CALLBACK_TOKEN_TTL_SECONDS`. */
export const DEFAULT_CALLBACK_TOKEN_TTL_SECONDS = 300;
/** The private claim naming the subscription a callback token was issued for. */
export const SUBSCRIPTION_CLAIM = "whs";
/** How many subscriptions' tokens one instance keeps; the oldest entry is forgotten first. */
const CAPACITY = 10_000;

/** What a subscription's callback token grants, and to whom. */
export interface CallbackGrant {
  subscriptionId: string;
  providerId: string;
  /** The client that set the callback scopes (`callback_client_id`): the token acts as it. */
  clientId: string;
  /** The subscription's callback scopes, already checked by `checkCallbackScopes`. */
  scopes: readonly string[];
}

export interface CallbackTokensOptions {
  tokens: Pick<AccessTokens, "issue">;
  clients: Pick<ClientStates, "get">;
  clock: Clock;
  lifetimeSeconds: number;
  logger?: Pick<Logger, "warn">;
}

type Entry = IssuedEntry | RefusedEntry;

interface IssuedEntry {
  kind: "issued";
  /** The client, its generation and the scopes the token was issued for: another one needs another token. */
  grantKey: string;
  token: Promise<string>;
  renewAtMs: number;
}

/** The client may not have a token; kept so that this is reported once, not at every delivery. */
interface RefusedEntry {
  kind: "refused";
  clientId: string;
}

/**
 * The `webhook-callback-token` of each subscription's deliveries: an access token of the client that set the
 * callback scopes, with exactly those scopes, a short lifetime and the claim `whs` naming the subscription.
 * One token per subscription is kept and reissued once half its life has passed, so deliveries do not each
 * cost a signature; the client's state is checked on every call, so a revoked client's token is never handed out.
 */
export class CallbackTokens {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly options: CallbackTokensOptions) {}

  /** The token for a delivery of this subscription; undefined without callback scopes or a usable client. */
  async tokenFor(grant: CallbackGrant): Promise<string | undefined> {
    if (grant.scopes.length === 0) {
      this.entries.delete(grant.subscriptionId);
      return undefined;
    }
    const client = await this.options.clients.get(grant.clientId);
    if (!isUsable(client, grant)) return this.refuse(grant);
    const grantKey = JSON.stringify([grant.clientId, grant.providerId, client.tokenGeneration, grant.scopes]);
    const nowMs = this.options.clock.now().getTime();
    const entry = this.entries.get(grant.subscriptionId);
    if (entry?.kind === "issued" && entry.grantKey === grantKey && nowMs < entry.renewAtMs) return entry.token;
    return this.issue(grant, grantKey, client.tokenGeneration, nowMs);
  }

  /** Drops what is kept for a subscription (deleted, or its callback scopes removed). */
  forget(subscriptionId: string): void {
    this.entries.delete(subscriptionId);
  }

  private issue(grant: CallbackGrant, grantKey: string, generation: string, nowMs: number): Promise<string> {
    const { tokens, lifetimeSeconds } = this.options;
    const token = tokens.issue(
      { clientId: grant.clientId, providerId: grant.providerId, scopes: [...grant.scopes], generation },
      { lifetimeSeconds, extraClaims: { [SUBSCRIPTION_CLAIM]: grant.subscriptionId } },
    );
    const entry: Entry = { kind: "issued", grantKey, token, renewAtMs: nowMs + (lifetimeSeconds * 1000) / 2 };
    this.remember(grant.subscriptionId, entry);
    token.catch(() => {
      if (this.entries.get(grant.subscriptionId) === entry) this.entries.delete(grant.subscriptionId);
    });
    return token;
  }

  private refuse(grant: CallbackGrant): undefined {
    const entry = this.entries.get(grant.subscriptionId);
    if (entry?.kind !== "refused" || entry.clientId !== grant.clientId) {
      this.options.logger?.warn(
        { subscriptionId: grant.subscriptionId, clientId: grant.clientId },
        "webhook deliveries go without a callback token: the client that set its scopes is disabled or deleted",
      );
      this.remember(grant.subscriptionId, { kind: "refused", clientId: grant.clientId });
    }
    return undefined;
  }

  private remember(subscriptionId: string, entry: Entry): void {
    setNewest(this.entries, subscriptionId, entry, CAPACITY);
  }
}

function isUsable(client: ClientState | null, grant: CallbackGrant): client is ClientState {
  return (
    client !== null && client.clientId === grant.clientId && !client.disabled && client.providerId === grant.providerId
  );
}
