import {
  type CryptoKey,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JSONWebKeySet,
  type JWK,
} from "jose";
import type { Clock } from "../platform/clock.js";
import type { SigningKeyRow } from "./entities.js";
import type { IdentityRepository } from "./identity-repository.js";
import { sealPrivateKey, unsealPrivateKey } from "./key-sealing.js";

export const TOKEN_ALGORITHM = "ES256";
/** How far a token's clock may be from ours (iat, exp). Small on purpose. */
export const CLOCK_SKEW_SECONDS = 30;
/** How long a cached key set is trusted before the database is asked again for newer keys. */
const REFRESH_MS = 30_000;
/**
 * A rotated-in key is published (JWKS, every instance's cache) this long before it signs, so no instance
 * meets a token whose key it has not loaded yet. Longer than REFRESH_MS.
 */
export const PUBLISH_BEFORE_SIGNING_MS = REFRESH_MS + 5_000;
/** At most one reload per this many milliseconds for tokens naming an unknown key. */
const UNKNOWN_KID_RELOAD_MS = 5_000;

interface LoadedKey {
  row: SigningKeyRow;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

/**
 * The service's own signing keys, kept in the database so every instance signs and verifies with the same
 * ones. A new key is published at once and signs from PUBLISH_BEFORE_SIGNING_MS later on; the key it replaces
 * signs until then and verifies until no token it signed can be alive.
 */
export class KeyStore {
  private keys: LoadedKey[] = [];
  private loadedAt = 0;
  private readonly privateKeys = new Map<string, CryptoKey>();

  constructor(
    private readonly repository: IdentityRepository,
    private readonly clock: Clock,
    private readonly keyEncryptionKey: Buffer | undefined,
    private readonly tokenLifetimeSeconds: number,
  ) {}

  /** Loads the keys, making the first one if there is none yet. */
  async initialize(): Promise<void> {
    await this.reload();
    if (this.keys.length > 0) return;
    await this.repository.withLock("provision-signing-keys", async () => {
      if ((await this.repository.listSigningKeys()).length === 0) await this.createKey();
    });
    await this.reload();
  }

  /** Makes a new key that takes over signing after PUBLISH_BEFORE_SIGNING_MS; answers its id. */
  async rotate(): Promise<string> {
    const kid = await this.repository.withLock("provision-signing-keys", () => this.createKey());
    await this.reload();
    return kid;
  }

  async signingKey(): Promise<{ kid: string; privateKey: CryptoKey }> {
    if (this.clock.now().getTime() - this.loadedAt > REFRESH_MS) await this.reload();
    const now = this.clock.now().getTime();
    const published = this.keys.find((key) => key.row.createdAt.getTime() + PUBLISH_BEFORE_SIGNING_MS <= now);
    const replaced = this.keys.find((key) => key.row.retiredAt !== null);
    const row = (published ?? replaced ?? this.keys[0])?.row;
    if (!row) throw new Error("no signing key is loaded");
    let privateKey = this.privateKeys.get(row.kid);
    if (!privateKey) {
      const privateJwk = JSON.parse(unsealPrivateKey(row.privateJwk, this.keyEncryptionKey)) as JWK;
      privateKey = (await importJWK(privateJwk, row.algorithm)) as CryptoKey;
      this.privateKeys.set(row.kid, privateKey);
    }
    return { kid: row.kid, privateKey };
  }

  /** The public key for `kid`, if that key may still verify tokens. */
  async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    let key = this.keys.find((candidate) => candidate.row.kid === kid);
    if (!key && this.clock.now().getTime() - this.loadedAt > UNKNOWN_KID_RELOAD_MS) {
      await this.reload();
      key = this.keys.find((candidate) => candidate.row.kid === kid);
    }
    return key && this.canVerify(key.row) ? key.publicKey : undefined;
  }

  async jwks(): Promise<JSONWebKeySet> {
    if (this.clock.now().getTime() - this.loadedAt > REFRESH_MS) await this.reload();
    return {
      keys: this.keys
        .filter((key) => this.canVerify(key.row))
        .map((key) => ({ ...key.publicJwk, kid: key.row.kid, alg: TOKEN_ALGORITHM, use: "sig" })),
    };
  }

  /** A replaced key signed until its successor was published; its tokens live a lifetime (and skew) longer. */
  private canVerify(row: SigningKeyRow): boolean {
    if (!row.retiredAt) return true;
    const lastSignedAt = row.retiredAt.getTime() + PUBLISH_BEFORE_SIGNING_MS;
    return this.clock.now().getTime() <= lastSignedAt + (this.tokenLifetimeSeconds + CLOCK_SKEW_SECONDS) * 1000;
  }

  private async createKey(): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(TOKEN_ALGORITHM, { extractable: true });
    const publicJwk = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(publicJwk);
    await this.repository.insertSigningKey({
      kid,
      algorithm: TOKEN_ALGORITHM,
      publicJwk: JSON.stringify(publicJwk),
      privateJwk: sealPrivateKey(JSON.stringify(await exportJWK(privateKey)), this.keyEncryptionKey),
      createdAt: this.clock.now(),
      retiredAt: null,
    });
    return kid;
  }

  private async reload(): Promise<void> {
    const rows = await this.repository.listSigningKeys();
    // Newest first; of keys made at the same instant, the one not yet replaced is the newer.
    rows.sort(
      (a, b) =>
        b.createdAt.getTime() - a.createdAt.getTime() || Number(a.retiredAt !== null) - Number(b.retiredAt !== null),
    );
    this.keys = await Promise.all(
      rows.map(async (row) => {
        const publicJwk = JSON.parse(row.publicJwk) as JWK;
        return { row, publicJwk, publicKey: (await importJWK(publicJwk, row.algorithm)) as CryptoKey };
      }),
    );
    const current = rows.find((row) => !row.retiredAt);
    if (current) unsealPrivateKey(current.privateJwk, this.keyEncryptionKey);
    this.loadedAt = this.clock.now().getTime();
  }
}
