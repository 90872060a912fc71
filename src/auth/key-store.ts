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
/** How far a token's clock may be from ours (iat, exp), and so how far apart instances' clocks may be. */
export const CLOCK_SKEW_SECONDS = 30;
/** How long an instance trusts its loaded key set before it asks the database again for newer keys. */
export const KEY_REFRESH_MS = 30_000;
/** `Cache-Control: max-age` of the JWKS document: how long a verifier elsewhere may keep its copy. */
export const JWKS_MAX_AGE_SECONDS = 60;
/**
 * A new key is in the JWKS of every instance within KEY_REFRESH_MS of being published, and a verifier that
 * honours the cache has a copy with it JWKS_MAX_AGE_SECONDS after that. It signs only once both have passed,
 * plus the clock difference instances may have: 30 + 60 + 30 = 120 s. So neither an instance nor an external
 * verifier meets a token whose key it has not loaded yet.
 */
export const PUBLISH_BEFORE_SIGNING_MS = KEY_REFRESH_MS + JWKS_MAX_AGE_SECONDS * 1000 + CLOCK_SKEW_SECONDS * 1000;
/** At most one reload per this many milliseconds for tokens naming an unknown key. */
const UNKNOWN_KID_RELOAD_MS = 5_000;
/** The database lock under which keys are added and published. */
const KEYS_LOCK = "provision-signing-keys";

/** This instance's key-encryption key does not open the key it should sign with (sealed with another one). */
export class SigningKeyUnavailable extends Error {
  constructor(reason: Error) {
    super(`this instance cannot sign: ${reason.message}`);
  }
}

interface LoadedKey {
  row: SigningKeyRow;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

/**
 * Adds a signing key after every other one (the database orders them), unpublished: the first service instance
 * that loads it publishes it with its own clock. So `keys rotate`, run anywhere, never puts its machine's clock
 * into the keys' timeline. Refuses, changing nothing, when `keyEncryptionKey` does not open the stored keys.
 */
export async function addSigningKey(
  repository: IdentityRepository,
  keyEncryptionKey: Buffer | undefined,
): Promise<string> {
  return repository.withLock(KEYS_LOCK, async () => {
    const [newest] = await repository.listSigningKeys();
    if (newest) unsealPrivateKey(newest.privateJwk, keyEncryptionKey);
    return insertKey(repository, keyEncryptionKey);
  });
}

async function insertKey(repository: IdentityRepository, keyEncryptionKey: Buffer | undefined): Promise<string> {
  const { publicKey, privateKey } = await generateKeyPair(TOKEN_ALGORITHM, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  await repository.insertSigningKey({
    kid,
    algorithm: TOKEN_ALGORITHM,
    publicJwk: JSON.stringify(publicJwk),
    privateJwk: sealPrivateKey(JSON.stringify(await exportJWK(privateKey)), keyEncryptionKey),
  });
  return kid;
}

/**
 * The service's own signing keys, kept in the database so every instance signs and verifies with the same
 * ones. A new key is published when an instance first loads it (stamped with that instance's clock) and signs
 * from PUBLISH_BEFORE_SIGNING_MS later on; the key it replaces signs until then and verifies until no token it
 * signed can be alive. No key that may no longer verify ever signs.
 */
export class KeyStore {
  private keys: LoadedKey[] = [];
  private loadedAt = 0;
  private reloading: Promise<void> | undefined;
  private readonly privateKeys = new Map<string, CryptoKey>();
  /** Why the newest key cannot be opened here, if it cannot. */
  private unopenable: Error | undefined;

  constructor(
    private readonly repository: IdentityRepository,
    private readonly clock: Clock,
    private readonly keyEncryptionKey: Buffer | undefined,
    private readonly tokenLifetimeSeconds: number,
  ) {}

  /** Loads the keys (publishing any new one), making the first one if there is none yet. */
  async initialize(): Promise<void> {
    await this.reloadNow();
    if (this.keys.length === 0) {
      await this.repository.withLock(KEYS_LOCK, async () => {
        if ((await this.repository.listSigningKeys()).length === 0)
          await insertKey(this.repository, this.keyEncryptionKey);
      });
      await this.reloadNow();
    }
    if (this.unopenable) throw this.unopenable;
  }

  /** Makes and publishes a new key that takes over signing after PUBLISH_BEFORE_SIGNING_MS; answers its id. */
  async rotate(): Promise<string> {
    const kid = await addSigningKey(this.repository, this.keyEncryptionKey);
    await this.reloadNow();
    return kid;
  }

  async signingKey(): Promise<{ kid: string; privateKey: CryptoKey }> {
    if (this.clock.now().getTime() - this.loadedAt > KEY_REFRESH_MS) await this.reload();
    const row = this.signingRow();
    let privateKey = this.privateKeys.get(row.kid);
    if (!privateKey) {
      privateKey = await this.openPrivateKey(row);
      this.privateKeys.set(row.kid, privateKey);
    }
    return { kid: row.kid, privateKey };
  }

  /** Throws when this instance cannot open the newest key, which signs once it has been published long enough. */
  async checkSigning(): Promise<void> {
    if (this.clock.now().getTime() - this.loadedAt > KEY_REFRESH_MS) await this.reload();
    if (this.unopenable) throw new SigningKeyUnavailable(this.unopenable);
  }

  private async openPrivateKey(row: SigningKeyRow): Promise<CryptoKey> {
    let privateJwk: JWK;
    try {
      privateJwk = JSON.parse(unsealPrivateKey(row.privateJwk, this.keyEncryptionKey)) as JWK;
    } catch (error) {
      throw new SigningKeyUnavailable(error as Error);
    }
    return (await importJWK(privateJwk, row.algorithm)) as CryptoKey;
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
    if (this.clock.now().getTime() - this.loadedAt > KEY_REFRESH_MS) await this.reload();
    return {
      keys: this.keys
        .filter((key) => this.canVerify(key.row))
        .map((key) => ({ ...key.publicJwk, kid: key.row.kid, alg: TOKEN_ALGORITHM, use: "sig" })),
    };
  }

  /**
   * The newest published key that has been published long enough, among those that may still verify; while
   * none has (the very first key), the one published longest ago.
   */
  private signingRow(): SigningKeyRow {
    const now = this.clock.now().getTime();
    const usable = this.keys.map((key) => key.row).filter((row) => row.publishedAt !== null && this.canVerify(row));
    const ready = usable.find((row) => (row.publishedAt?.getTime() ?? now) + PUBLISH_BEFORE_SIGNING_MS <= now);
    const row = ready ?? usable.at(-1);
    if (!row) throw new Error("no signing key is loaded");
    return row;
  }

  /** A replaced key signed until its successor had been published long enough; its tokens live a lifetime (and skew) longer. */
  private canVerify(row: SigningKeyRow): boolean {
    if (!row.retiredAt) return true;
    const lastSignedAt = row.retiredAt.getTime() + PUBLISH_BEFORE_SIGNING_MS;
    return this.clock.now().getTime() <= lastSignedAt + (this.tokenLifetimeSeconds + CLOCK_SKEW_SECONDS) * 1000;
  }

  /** One reload at a time: callers arriving while one runs share it. */
  private reload(): Promise<void> {
    this.reloading ??= this.load().finally(() => {
      this.reloading = undefined;
    });
    return this.reloading;
  }

  /** A reload that starts after this call, so it sees every change made before it. */
  private async reloadNow(): Promise<void> {
    await this.reloading?.catch(() => undefined);
    await this.reload();
  }

  private async load(): Promise<void> {
    let rows = await this.repository.listSigningKeys();
    if (rows.some((row) => row.publishedAt === null)) {
      // Made elsewhere (`keys rotate`): published now, on the clock of the service that signs and verifies.
      await this.repository.withLock(KEYS_LOCK, () => this.repository.publishSigningKeys(this.clock.now()));
      rows = await this.repository.listSigningKeys();
    }
    this.keys = await Promise.all(
      rows.map(async (row) => {
        const publicJwk = JSON.parse(row.publicJwk) as JWK;
        return { row, publicJwk, publicKey: (await importJWK(publicJwk, row.algorithm)) as CryptoKey };
      }),
    );
    // Public keys still load when the newest private key cannot be opened here (sealed with another
    // key-encryption key): verification and the JWKS go on; start-up, signing and readiness fail naming why.
    const [newest] = rows;
    this.unopenable = newest ? unsealingError(newest, this.keyEncryptionKey) : undefined;
    this.loadedAt = this.clock.now().getTime();
  }
}

function unsealingError(row: SigningKeyRow, keyEncryptionKey: Buffer | undefined): Error | undefined {
  try {
    unsealPrivateKey(row.privateJwk, keyEncryptionKey);
    return undefined;
  } catch (error) {
    return error as Error;
  }
}
