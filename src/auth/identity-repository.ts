import { type DataSource, IsNull } from "typeorm";
import { inTransaction, withDatabaseLock, writeSerially } from "../platform/database.js";
import {
  ClientEntity,
  type ClientRow,
  ProviderEntity,
  type ProviderRow,
  SigningKeyEntity,
  type SigningKeyRow,
} from "./entities.js";

/** The queries of providers, OAuth clients and signing keys. */
export class IdentityRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insertProvider(row: ProviderRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ProviderEntity).insert(row));
  }

  async listProviders(): Promise<ProviderRow[]> {
    return this.dataSource.getRepository(ProviderEntity).find({ order: { createdAt: "ASC", id: "ASC" } });
  }

  async findProvider(id: string): Promise<ProviderRow | null> {
    return this.dataSource.getRepository(ProviderEntity).findOneBy({ id });
  }

  async insertClient(row: ClientRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ClientEntity).insert(row));
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

  async listClients(
    providerId: string | undefined,
    offset: number,
    limit: number,
  ): Promise<{ rows: ClientRow[]; total: number }> {
    const [rows, total] = await this.dataSource.getRepository(ClientEntity).findAndCount({
      where: providerId ? { providerId } : {},
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
  }

  async deleteClient(providerId: string, clientId: string): Promise<boolean> {
    const result = await writeSerially(this.dataSource, () =>
      this.dataSource.getRepository(ClientEntity).delete({ clientId, providerId }),
    );
    return (result.affected ?? 0) > 0;
  }

  async listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.dataSource.getRepository(SigningKeyEntity).find({ order: { createdAt: "DESC", kid: "ASC" } });
  }

  /** Stores `row` as the signing key and retires the one before it, in one transaction. */
  async insertSigningKey(row: SigningKeyRow): Promise<void> {
    await inTransaction(this.dataSource, async (manager) => {
      const keys = manager.getRepository(SigningKeyEntity);
      await keys.update({ retiredAt: IsNull() }, { retiredAt: row.createdAt });
      await keys.insert(row);
    });
  }

  /** Runs `work` while holding a named lock across every instance on the database. */
  withLock<T>(name: string, work: () => Promise<T>): Promise<T> {
    return withDatabaseLock(this.dataSource, name, work);
  }
}
