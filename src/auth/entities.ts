import { EntitySchema } from "typeorm/entity-schema/EntitySchema.js";

export interface ProviderRow {
  id: string;
  name: string;
  createdAt: Date;
  /** What its licenses say of it (License.copyright, providerUrl, providerEmail); null = not set. */
  copyright?: string | null;
  url?: string | null;
  email?: string | null;
}

export interface ClientRow {
  clientId: string;
  providerId: string;
  name: string;
  /** Granted scopes, space-separated. */
  scopes: string;
  /** `scrypt$N$r$p$salt$hash`, see secrets.ts. */
  secretHash: string;
  disabled: boolean;
  /**
   * Random, replaced when the client is created, disabled or given a new secret. Its access tokens carry it
   * (claim `gen`) and are refused once it differs, so none of them outlives such a change.
   */
  tokenGeneration: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface SigningKeyRow {
  kid: string;
  /** Insertion order, assigned by the database: the newest key has the highest. */
  seq: number;
  algorithm: string;
  publicJwk: string;
  /** The private JWK, sealed with PROVISION_KEY_ENCRYPTION_KEY when one is configured (see key-sealing.ts). */
  privateJwk: string;
  /**
   * When the first service instance loaded the key, by that instance's clock (never the clock of whoever made
   * it, such as `keys rotate`); it signs from PUBLISH_BEFORE_SIGNING_MS later on. Null until an instance saw it.
   */
  publishedAt: Date | null;
  /** When a newer key was published (it takes over signing PUBLISH_BEFORE_SIGNING_MS later); null for the newest. */
  retiredAt: Date | null;
}

const datetime = (name: string, nullable = false) => ({ name, type: "datetime", precision: 3, nullable }) as const;

export const ProviderEntity = new EntitySchema<ProviderRow>({
  name: "Provider",
  tableName: "providers",
  columns: {
    id: { type: "varchar", length: 36, primary: true },
    name: { type: "varchar", length: 255 },
    createdAt: datetime("created_at"),
    copyright: { type: "varchar", length: 255, nullable: true },
    url: { type: "varchar", length: 2048, nullable: true },
    email: { type: "varchar", length: 320, nullable: true },
  },
});

export const ClientEntity = new EntitySchema<ClientRow>({
  name: "OAuthClient",
  tableName: "oauth_clients",
  columns: {
    clientId: { name: "client_id", type: "varchar", length: 64, primary: true },
    providerId: { name: "provider_id", type: "varchar", length: 36 },
    name: { type: "varchar", length: 255 },
    scopes: { type: "text" },
    secretHash: { name: "secret_hash", type: "varchar", length: 255 },
    disabled: { type: "boolean" },
    tokenGeneration: { name: "token_generation", type: "varchar", length: 32 },
    createdAt: datetime("created_at"),
    lastUsedAt: datetime("last_used_at", true),
  },
});

export const SigningKeyEntity = new EntitySchema<SigningKeyRow>({
  name: "SigningKey",
  tableName: "signing_keys",
  columns: {
    kid: { type: "varchar", length: 64, primary: true },
    seq: { type: "int" },
    algorithm: { type: "varchar", length: 16 },
    publicJwk: { name: "public_jwk", type: "text" },
    privateJwk: { name: "private_jwk", type: "text" },
    publishedAt: datetime("published_at", true),
    retiredAt: datetime("retired_at", true),
  },
});

export const identityEntities = [ProviderEntity, ClientEntity, SigningKeyEntity];
