import type { DataSource } from "typeorm";
import { IsNull } from "typeorm/find-options/operator/IsNull.js";
import { LessThan } from "typeorm/find-options/operator/LessThan.js";
import { LessThanOrEqual } from "typeorm/find-options/operator/LessThanOrEqual.js";
import { inTransaction, withDatabaseLock, writeSerially } from "../platform/database.js";
import {
  ClientEntity,
  type ClientRow,
  ProviderEntity,
  type ProviderRow,
  SigningKeyEntity,
  type SigningKeyRow,
} from "./entities.js";

/**
 * The queries of providers, OAuth clients and signing keys. `clientChanged` hears of every client written,
 * after the write, so that caches of client state everywhere can drop it.
 */
export class IdentityRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clientChanged: (clientId: string) => Promise<void> = async () => undefined,
  ) {}

  async insertProvider(row: ProviderRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ProviderEntity).insert(row));
  }

  async listProviders(): Promise<ProviderRow[]> {
    return this.dataSource.getRepository(ProviderEntity).find({ order: { createdAt: "ASC", id: "ASC" } });
  }

  async updateProvider(id: string, changes: Partial<Omit<ProviderRow, "id" | "createdAt">>): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ProviderEntity).update({ id }, changes));
  }

  async findProvider(id: string): Promise<ProviderRow | null> {
    return this.dataSource.getRepository(ProviderEntity).findOneBy({ id });
  }

  async insertClient(row: ClientRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ClientEntity).insert(row));
    await this.clientChanged(row.clientId);
  }

  /** Any provider's client: for the token endpoint and token verification only. */
  async findClient(clientId: string): Promise<ClientRow | null> {
    return this.dataSource.getRepository(ClientEntity).findOneBy({ clientId });
  }

  async findProviderClient(providerId: string, clientId: string): Promise<ClientRow | null> {
    return this.dataSource.getRepository(ClientEntity).findOneBy({ clientId, providerId });
  }

  async countClients(): Promise<number> {
    return this.dataSource.getRepository(ClientEntity).count();
  }

  /** One provider's clients, newest first. A missing provider is a bug in the caller, never "every provider". */
  async listClients(providerId: string, offset: number, limit: number): Promise<{ rows: ClientRow[]; total: number }> {
    if (!providerId) throw new Error("listClients needs a provider id; listAllClients lists every provider's");
    return this.pageOfClients({ providerId }, offset, limit);
  }

  /** Every provider's clients, newest first: for the operator's CLI only. */
  async listAllClients(offset: number, limit: number): Promise<{ rows: ClientRow[]; total: number }> {
    return this.pageOfClients({}, offset, limit);
  }

  private async pageOfClients(
    where: { providerId?: string },
    offset: number,
    limit: number,
  ): Promise<{ rows: ClientRow[]; total: number }> {
    const [rows, total] = await this.dataSource.getRepository(ClientEntity).findAndCount({
      where,
      order: { createdAt: "DESC", clientId: "ASC" },
      skip: offset,
      take: limit,
    });
    return { rows, total };
  }

  async updateClient(clientId: string, changes: Partial<Omit<ClientRow, "clientId">>): Promise<void> {
    await writeSerially(this.dataSource, () =>
      this.dataSource.getRepository(ClientEntity).update({ clientId }, changes),
    );
    await this.clientChanged(clientId);
  }

  /** Records a client's last use: no change to what token checks read, so nobody is told. */
  async touchClient(clientId: string, at: Date): Promise<void> {
    await writeSerially(this.dataSource, () =>
      this.dataSource.getRepository(ClientEntity).update({ clientId }, { lastUsedAt: at }),
    );
  }

  async deleteClient(providerId: string, clientId: string): Promise<boolean> {
    const result = await writeSerially(this.dataSource, () =>
      this.dataSource.getRepository(ClientEntity).delete({ clientId, providerId }),
    );
    await this.clientChanged(clientId);
    return (result.affected ?? 0) > 0;
  }

  /** Every signing key, newest (highest `seq`) first. */
  async listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.dataSource.getRepository(SigningKeyEntity).find({ order: { seq: "DESC" } });
  }

  /**
   * Stores a new key after every other one (`seq` one above the highest), not yet published. Call it while
   * holding the signing-keys lock, so two keys never get one `seq` (a unique index refuses that anyway).
   */
  async insertSigningKey(row: Omit<SigningKeyRow, "seq" | "publishedAt" | "retiredAt">): Promise<void> {
    await inTransaction(this.dataSource, async (manager) => {
      const keys = manager.getRepository(SigningKeyEntity);
      const found = await keys.createQueryBuilder("key").select("MAX(key.seq)", "highest").getRawOne();
      const seq = Number((found as { highest?: unknown } | undefined)?.highest ?? 0) + 1;
      await keys.insert({ ...row, seq, publishedAt: null, retiredAt: null });
    });
  }

  /**
   * Publishes, at `at`, every key no instance has published yet, and retires at the same instant every older
   * key still current: the newest of them takes over signing later. One transaction; false when none was new.
   */
  async publishSigningKeys(at: Date): Promise<boolean> {
    return inTransaction(this.dataSource, async (manager) => {
      const keys = manager.getRepository(SigningKeyEntity);
      const [newest] = await keys.find({ where: { publishedAt: IsNull() }, order: { seq: "DESC" }, take: 1 });
      if (!newest) return false;
      await keys.update({ publishedAt: IsNull(), seq: LessThanOrEqual(newest.seq) }, { publishedAt: at });
      await keys.update({ retiredAt: IsNull(), seq: LessThan(newest.seq) }, { retiredAt: at });
      return true;
    });
  }

  /** Runs `work` while holding a named lock across every instance on the database. */
  withLock<T>(name: string, work: () => Promise<T>): Promise<T> {
    return withDatabaseLock(this.dataSource, name, work);
  }
}
