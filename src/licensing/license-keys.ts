import { type CryptoKey, exportJWK, exportSPKI, generateKeyPair, importJWK, importSPKI, type JWK } from "jose";
import type { DataSource } from "typeorm";
import { IsNull } from "typeorm/find-options/operator/IsNull.js";
import { sealPrivateKey, unsealPrivateKey } from "../auth/key-sealing.js";
import type { Clock } from "../platform/clock.js";
import { inTransaction, isUniqueViolation, writeSerially } from "../platform/database.js";
import { LicenseSigningKeyEntity, type LicenseSigningKeyRow } from "./entities.js";

/** The JWS algorithm of license tokens: Ed25519 signatures. */
export const LICENSE_TOKEN_ALGORITHM = "EdDSA";
/** How long an instance signs with the active key it loaded before it asks whether another instance rotated it. */
export const ACTIVE_KEY_REFRESH_MS = 30_000;

/** A key id names its provider and generation (1 for the first key, one more for every rotation). */
const KID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[1-9][0-9]{0,8}$/i;

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  /** Base64 of the SPKI DER of the public key. */
  publicKeyBase64: string;
}

export interface VerificationKey {
  kid: string;
  providerId: string;
  publicKey: CryptoKey;
}

interface LoadedSigningKey {
  key: Promise<SigningKey>;
  loadedAtMs: number;
}

/**
 * Each provider's license-token signing keys (Ed25519), in `license_signing_keys`. A provider's first key is
 * made on first use; `rotate` makes a new one and retires the old, which keeps verifying (keys are never
 * deleted, so no token ever outlives its key). A key's id is `<providerId>.<generation>`: two instances that
 * make the same generation at once collide on the primary key, so exactly one of them lands and both sign
 * with it. Private keys are sealed at rest with the key-encryption key and opened once per instance.
 */
export class LicenseKeys {
  private readonly signing = new Map<string, LoadedSigningKey>();
  private readonly verifying = new Map<string, Promise<VerificationKey | undefined>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly keyEncryptionKey: Buffer | undefined,
  ) {}

  /** The provider's active key, made now if it has none. */
  signingKey(providerId: string): Promise<SigningKey> {
    const nowMs = this.clock.now().getTime();
    const loaded = this.signing.get(providerId);
    if (loaded && nowMs - loaded.loadedAtMs <= ACTIVE_KEY_REFRESH_MS) return loaded.key;
    const key = this.loadActiveKey(providerId, loaded?.key);
    this.signing.set(providerId, { key, loadedAtMs: nowMs });
    key.catch(() => {
      if (this.signing.get(providerId)?.key === key) this.signing.delete(providerId);
    });
    return key;
  }

  /** Base64 of the SPKI DER of the provider's active public key: what an application verifies tokens with. */
  async publicKeyBase64(providerId: string): Promise<string> {
    return (await this.signingKey(providerId)).publicKeyBase64;
  }

  /** The public key `kid` names, of any provider, retired or not; undefined when there is no such key. */
  verificationKey(kid: string): Promise<VerificationKey | undefined> {
    if (!KID_PATTERN.test(kid)) return Promise.resolve(undefined);
    return this.verifying.get(kid) ?? this.remember(kid, this.loadVerificationKey(kid));
  }

  private remember(kid: string, key: Promise<VerificationKey | undefined>): Promise<VerificationKey | undefined> {
    this.verifying.set(kid, key);
    // Only keys found stay remembered: an unknown kid may be a key another instance is about to make.
    key.then(
      (found) => found ?? this.verifying.delete(kid),
      () => this.verifying.delete(kid),
    );
    return key;
  }

  /**
   * Makes a new active key for the provider and retires the current one (which keeps verifying); answers the
   * active key's id. Rotations at once leave one active key, the newest (one of them may lose and answer it).
   */
  async rotate(providerId: string): Promise<string> {
    const generation = (await this.countKeys(providerId)) + 1;
    const row = await this.newRow(providerId, generation);
    try {
      await inTransaction(this.dataSource, async (manager) => {
        const keys = manager.getRepository(LicenseSigningKeyEntity);
        await keys.update({ providerId, retiredAt: IsNull() }, { retiredAt: row.createdAt });
        await keys.insert(row);
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    this.signing.delete(providerId);
    return (await this.signingKey(providerId)).kid;
  }

  /** Reads the active key; a refresh the database cannot answer keeps the key already loaded. */
  private async loadActiveKey(providerId: string, previous: Promise<SigningKey> | undefined): Promise<SigningKey> {
    const kept = await previous?.catch(() => undefined);
    let row: LicenseSigningKeyRow;
    try {
      row = (await this.findActiveRow(providerId)) ?? (await this.createFirstKey(providerId));
    } catch (error) {
      if (kept) return kept;
      throw error;
    }
    if (kept?.kid === row.kid) return kept;
    if (!this.verifying.has(row.kid)) this.remember(row.kid, verificationKeyOf(row));
    return openSigningKey(row, this.keyEncryptionKey);
  }

  /** Inserts generation 1; when another instance got there first, answers its key. */
  private async createFirstKey(providerId: string): Promise<LicenseSigningKeyRow> {
    const row = await this.newRow(providerId, 1);
    try {
      await writeSerially(this.dataSource, () => this.dataSource.getRepository(LicenseSigningKeyEntity).insert(row));
      return row;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    const winner = await this.findActiveRow(providerId);
    if (!winner) throw new Error("a license signing key was made and retired at once; try again");
    return winner;
  }

  private async findActiveRow(providerId: string): Promise<LicenseSigningKeyRow | undefined> {
    const rows = await this.dataSource
      .getRepository(LicenseSigningKeyEntity)
      .findBy({ providerId, retiredAt: IsNull() });
    return rows.sort((a, b) => generationOf(b.kid) - generationOf(a.kid))[0];
  }

  private countKeys(providerId: string): Promise<number> {
    return this.dataSource.getRepository(LicenseSigningKeyEntity).countBy({ providerId });
  }

  private async loadVerificationKey(kid: string): Promise<VerificationKey | undefined> {
    const row = await this.dataSource.getRepository(LicenseSigningKeyEntity).findOneBy({ kid });
    return row ? verificationKeyOf(row) : undefined;
  }

  private async newRow(providerId: string, generation: number): Promise<LicenseSigningKeyRow> {
    const { publicKey, privateKey } = await generateKeyPair(LICENSE_TOKEN_ALGORITHM, {
      crv: "Ed25519",
      extractable: true,
    });
    return {
      kid: `${providerId}.${generation}`,
      providerId,
      algorithm: LICENSE_TOKEN_ALGORITHM,
      publicKeySpki: spkiBase64(await exportSPKI(publicKey)),
      sealedPrivateKey: sealPrivateKey(JSON.stringify(await exportJWK(privateKey)), this.keyEncryptionKey),
      createdAt: this.clock.now(),
      retiredAt: null,
    };
  }
}

async function verificationKeyOf(row: LicenseSigningKeyRow): Promise<VerificationKey> {
  return { kid: row.kid, providerId: row.providerId, publicKey: await importPublicKey(row.publicKeySpki) };
}

function generationOf(kid: string): number {
  return Number(kid.slice(kid.lastIndexOf(".") + 1));
}

async function openSigningKey(row: LicenseSigningKeyRow, keyEncryptionKey: Buffer | undefined): Promise<SigningKey> {
  const privateJwk = JSON.parse(unsealPrivateKey(row.sealedPrivateKey, keyEncryptionKey)) as JWK;
  const privateKey = (await importJWK(privateJwk, row.algorithm)) as CryptoKey;
  return { kid: row.kid, privateKey, publicKeyBase64: row.publicKeySpki };
}

/** The PEM an application builds from the base64 SPKI to import it (`importSPKI` in jose). */
function spkiPem(publicKeyBase64: string): string {
  const lines = publicKeyBase64.match(/.{1,64}/g) ?? [];
  return ["-----BEGIN PUBLIC KEY-----", ...lines, "-----END PUBLIC KEY-----"].join("\n");
}

function spkiBase64(pem: string): string {
  return pem.replace(/-----(BEGIN|END) PUBLIC KEY-----|\s/g, "");
}

function importPublicKey(publicKeyBase64: string): Promise<CryptoKey> {
  return importSPKI(spkiPem(publicKeyBase64), LICENSE_TOKEN_ALGORITHM);
}
