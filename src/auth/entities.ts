import { EntitySchema } from "typeorm";

export interface ProviderRow {
  id: string;
  name: string;
  createdAt: Date;
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
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface SigningKeyRow {
  kid: string;
  algorithm: string;
  publicJwk: string;
  /** The private JWK, sealed with PROVISION_KEY_ENCRYPTION_KEY when one is configured (see key-sealing.ts). */
  privateJwk: string;
  createdAt: Date;
  /** When a newer key was made (it takes over signing PUBLISH_BEFORE_SIGNING_MS later); null for the newest. */
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
    createdAt: datetime("created_at"),
    lastUsedAt: datetime("last_used_at", true),
  },
});

export const SigningKeyEntity = new EntitySchema<SigningKeyRow>({
  name: "SigningKey",
  tableName: "signing_keys",
  columns: {
    kid: { type: "varchar", length: 64, primary: true },
    algorithm: { type: "varchar", length: 16 },
    publicJwk: { name: "public_jwk", type: "text" },
    privateJwk: { name: "private_jwk", type: "text" },
    createdAt: datetime("created_at"),
    retiredAt: datetime("retired_at", true),
  },
});

export const identityEntities = [ProviderEntity, ClientEntity, SigningKeyEntity];
