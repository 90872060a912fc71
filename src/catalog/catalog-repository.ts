import type { DataSource, EntityManager, QueryFailedError } from "typeorm";
import {
  type Dialect,
  dialectOf,
  forUpdate,
  inTransaction,
  readSerially,
  writeSerially,
  yieldToEventLoop,
} from "../platform/database.js";
import { type FilterTerm, filterClauses, type ListColumns, orderSql, type SortKey } from "../platform/list-query.js";
import {
  FeatureEntity,
  type FeatureRow,
  MonitoredAssetEntity,
  type MonitoredAssetRow,
  ProductEntity,
  type ProductRow,
} from "./entities.js";
import { type ProductField, TEXT_SEARCH_FIELDS } from "./product-query.js";
import { placeholders, SqlTable } from "./sql-table.js";

export interface ProductTree {
  product: ProductRow;
  features: FeatureRow[];
  assets: MonitoredAssetRow[];
}

export interface ProductPageQuery {
  filter: FilterTerm<ProductField>[];
  sort: SortKey<ProductField>[];
  offset: number;
  limit: number;
}

const PRODUCT_COLUMNS: Record<ProductField, string> = {
  productCode: "product_code",
  productVersion: "product_version",
  name: "name",
  description: "description",
  externalId: "external_id",
  status: "status",
  isLocked: "is_locked",
  isDeleted: "is_deleted",
  createdAt: "created_at",
  updatedAt: "updated_at",
  expirationDate: "expiration_date",
  revisionNumber: "revision_number",
};

const PRODUCT_LIST: ListColumns<ProductField> = {
  columns: PRODUCT_COLUMNS,
  textColumns: TEXT_SEARCH_FIELDS.map((field) => PRODUCT_COLUMNS[field]),
};

/** Which unique rule a write broke, from the constraint named in the driver's message. */
export type UniqueRule = "product-code" | "feature-code" | "asset-metric" | "id" | "unknown";

export function uniqueRuleOf(error: QueryFailedError): UniqueRule {
  const message = String((error.driverError as { message?: string })?.message ?? error.message);
  if (/uq_products_provider_code|products\.product_code/.test(message)) return "product-code";
  if (/uq_features_product_code|features\.feature_code/.test(message)) return "feature-code";
  if (/uq_monitored_assets_|monitored_assets\.metric_name/.test(message)) return "asset-metric";
  if (/PRIMARY|\.id\b/.test(message)) return "id";
  return "unknown";
}

/** The catalog's queries, as SQL text built once per shape. Every product query is scoped by the owning provider. */
export class CatalogRepository {
  private readonly dialect: Dialect;
  readonly tables: CatalogTables;
  private readonly childrenSql = new Map<number, string>();

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectOf(dataSource);
    this.tables = {
      products: new SqlTable(dataSource, ProductEntity),
      features: new SqlTable(dataSource, FeatureEntity),
      assets: new SqlTable(dataSource, MonitoredAssetEntity),
    };
  }

  async listProducts(providerId: string, query: ProductPageQuery): Promise<{ rows: ProductRow[]; total: number }> {
    const { where, parameters } = this.filterSql(providerId, query.filter);
    const order = orderSql(PRODUCT_COLUMNS, query.sort);
    return readSerially(this.dataSource, () =>
      this.tables.products.page(this.dataSource.manager, {
        where,
        parameters,
        order,
        offset: query.offset,
        limit: query.limit,
      }),
    );
  }

  /** A product with its features and assets, in two queries. */
  async findProductTree(providerId: string, productId: string): Promise<ProductTree | null> {
    return readSerially(this.dataSource, async () => {
      const manager = this.dataSource.manager;
      const [product] = await this.tables.products.select(manager, "id = ? AND provider_id = ?", [
        productId,
        providerId,
      ]);
      if (!product) return null;
      const children = await this.loadChildren([product.id], manager);
      return { product, features: children.features(product.id), assets: children.assets(product.id) };
    });
  }

  /** Features and (own, not entitlements' copies) assets of many products in one query, each ordered by creation. */
  async loadChildren(productIds: string[], manager: EntityManager = this.dataSource.manager) {
    const { features, assets } = this.tables;
    const raw = productIds.length
      ? ((await manager.query(this.childrenSqlFor(productIds.length), [...productIds, ...productIds])) as Record<
          string,
          unknown
        >[])
      : [];
    const featuresByProduct = new Map<string, FeatureRow[]>();
    const assetsByProduct = new Map<string, MonitoredAssetRow[]>();
    for (const row of raw) {
      if (row.child_kind === "f") push(featuresByProduct, features.hydrate(row));
      else push(assetsByProduct, assets.hydrate(row));
    }
    return {
      features: (productId: string) => featuresByProduct.get(productId) ?? [],
      assets: (productId: string) => assetsByProduct.get(productId) ?? [],
    };
  }

  /** One INSERT and no transaction: the unique indexes refuse a taken code or id. */
  async insertProduct(row: ProductRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.tables.products.insertAlone(row));
  }

  /** Runs `work` in one transaction; its writes all land or none do. */
  async transaction<T>(work: (tx: CatalogTransaction) => Promise<T>): Promise<T> {
    return inTransaction(this.dataSource, (manager) =>
      work(new CatalogTransaction(manager, this.dialect, this, () => yieldToEventLoop(this.dataSource))),
    );
  }

  /**
   * Features and assets side by side: one UNION ALL whose columns are those of both tables, NULL where a
   * table has no such column; `child_kind` tells the rows apart. Entitlements' copies of assets are left out.
   */
  private childrenSqlFor(count: number): string {
    let sql = this.childrenSql.get(count);
    if (!sql) {
      const { features, assets } = this.tables;
      const names = [...new Set([...features.columns, ...assets.columns].map((column) => column.databaseName))];
      const selectOf = (table: SqlTable<{ id: string }>, kind: string, scope = "") => {
        const own = new Set(table.columns.map((column) => column.databaseName));
        const list = names.map((name) => (own.has(name) ? this.quote(name) : `NULL AS ${this.quote(name)}`));
        return `SELECT '${kind}' AS child_kind, ${list.join(", ")} FROM ${table.name} WHERE product_id IN (${placeholders(count)})${scope}`;
      };
      const ownAssets = " AND entitlement_id IS NULL";
      sql = `${selectOf(features, "f")} UNION ALL ${selectOf(assets, "a", ownAssets)} ORDER BY child_kind, created_at, id`;
      this.childrenSql.set(count, sql);
    }
    return sql;
  }

  private quote(name: string): string {
    return this.dataSource.driver.escape(name);
  }

  private filterSql(providerId: string, terms: FilterTerm<ProductField>[]): { where: string; parameters: unknown[] } {
    const clauses = ["provider_id = ?"];
    const parameters: unknown[] = [providerId];
    if (!terms.some((term) => term.kind === "compare" && term.field === "isDeleted")) {
      clauses.push("is_deleted = ?");
      parameters.push(this.columnValue("isDeleted", false));
    }
    const filter = filterClauses(PRODUCT_LIST, terms, (field, value) => this.columnValue(field, value));
    clauses.push(...filter.clauses);
    parameters.push(...filter.parameters);
    return { where: clauses.join(" AND "), parameters };
  }

  /** A filter value as the driver stores it in the field's column (booleans as 1/0, dates per dialect). */
  private columnValue(field: ProductField, value: unknown): unknown {
    const column = this.tables.products.columns.find((candidate) => candidate.propertyName === field);
    return column ? this.dataSource.driver.preparePersistentValue(value, column) : value;
  }
}

export interface CatalogTables {
  products: SqlTable<ProductRow>;
  features: SqlTable<FeatureRow>;
  assets: SqlTable<MonitoredAssetRow>;
}

/** Rows an operation writes, applied together by `CatalogTransaction.apply`. */
export interface CatalogWrites {
  insertProducts: ProductRow[];
  updateProducts: ProductRow[];
  insertAssets: MonitoredAssetRow[];
  updateAssets: MonitoredAssetRow[];
  insertFeatures: FeatureRow[];
  updateFeatures: FeatureRow[];
}

export function noWrites(): CatalogWrites {
  return {
    insertProducts: [],
    updateProducts: [],
    insertAssets: [],
    updateAssets: [],
    insertFeatures: [],
    updateFeatures: [],
  };
}

/** Products whose children one read of an import loads. */
const CHILDREN_PER_READ = 50;

/** Updates per pause: a chunk of writes stays well under the ~100 ms the event loop may be held on SQLite. */
const UPDATES_PER_PAUSE = 200;

/** Catalog writes inside one transaction; products are locked before they are changed. */
export class CatalogTransaction {
  private readonly tables: CatalogTables;

  constructor(
    private readonly manager: EntityManager,
    private readonly dialect: Dialect,
    private readonly repository: CatalogRepository,
    /** Lets other requests run between chunks of a long write (SQLite); reads wait in the write queue. */
    readonly pause: () => Promise<void>,
  ) {
    this.tables = repository.tables;
  }

  async lockProduct(providerId: string, productId: string): Promise<ProductRow | null> {
    const [row] = await this.tables.products.select(
      this.manager,
      `id = ? AND provider_id = ?${forUpdate(this.dialect)}`,
      [productId, providerId],
    );
    return row ?? null;
  }

  async lockProductByCode(providerId: string, productCode: string): Promise<ProductRow | null> {
    const [row] = await this.lockProductsByCode(providerId, [productCode]);
    return row ?? null;
  }

  /** The provider's products with these codes, locked. */
  async lockProductsByCode(providerId: string, productCodes: string[]): Promise<ProductRow[]> {
    if (productCodes.length === 0) return [];
    return this.tables.products.select(
      this.manager,
      `provider_id = ? AND product_code IN (${placeholders(productCodes.length)})${forUpdate(this.dialect)}`,
      [providerId, ...productCodes],
    );
  }

  /** The provider owning the product with this id, if there is one; ids are unique across providers. */
  async productOwner(productId: string): Promise<string | null> {
    return (await this.productOwners([productId])).get(productId) ?? null;
  }

  /** The owners of those of these product ids that exist. */
  async productOwners(productIds: string[]): Promise<Map<string, string>> {
    if (productIds.length === 0) return new Map();
    const rows = (await this.manager.query(
      `SELECT id, provider_id FROM ${this.tables.products.name} WHERE id IN (${placeholders(productIds.length)})`,
      productIds,
    )) as { id: string; provider_id: string }[];
    return new Map(rows.map((row) => [row.id, row.provider_id]));
  }

  async featureIdTaken(featureId: string): Promise<boolean> {
    return (await this.takenIds(this.tables.features.name, [featureId])).size > 0;
  }

  async assetIdTaken(assetId: string): Promise<boolean> {
    return (await this.takenIds(this.tables.assets.name, [assetId])).size > 0;
  }

  /** Those of these feature ids that some feature holds already. */
  takenFeatureIds(ids: string[]): Promise<Set<string>> {
    return this.takenIds(this.tables.features.name, ids);
  }

  /** Those of these asset ids that some monitored asset holds already. */
  takenAssetIds(ids: string[]): Promise<Set<string>> {
    return this.takenIds(this.tables.assets.name, ids);
  }

  async children(productId: string) {
    const children = await this.repository.loadChildren([productId], this.manager);
    return { features: children.features(productId), assets: children.assets(productId) };
  }

  /** Children of many products, read in chunks with a pause between them. */
  async childrenOf(productIds: string[]) {
    const features = new Map<string, FeatureRow[]>();
    const assets = new Map<string, MonitoredAssetRow[]>();
    for (let start = 0; start < productIds.length; start += CHILDREN_PER_READ) {
      const ids = productIds.slice(start, start + CHILDREN_PER_READ);
      const children = await this.repository.loadChildren(ids, this.manager);
      for (const id of ids) {
        features.set(id, children.features(id));
        assets.set(id, children.assets(id));
      }
      await this.pause();
    }
    return {
      features: (productId: string) => features.get(productId) ?? [],
      assets: (productId: string) => assets.get(productId) ?? [],
    };
  }

  async insertProduct(row: ProductRow): Promise<void> {
    await this.tables.products.insert(this.manager, [row]);
  }

  async updateProduct(row: ProductRow): Promise<void> {
    await this.tables.products.update(this.manager, row);
  }

  async insertFeature(row: FeatureRow): Promise<void> {
    await this.tables.features.insert(this.manager, [row]);
  }

  async updateFeature(row: FeatureRow): Promise<void> {
    await this.tables.features.update(this.manager, row);
  }

  async insertAsset(row: MonitoredAssetRow): Promise<void> {
    await this.tables.assets.insert(this.manager, [productLevel(row)]);
  }

  async updateAsset(row: MonitoredAssetRow): Promise<void> {
    await this.tables.assets.update(this.manager, productLevel(row));
  }

  /** Applies `writes` in chunks (products before the assets and features that refer to them), pausing between. */
  async apply(writes: CatalogWrites): Promise<void> {
    const { products, features, assets } = this.tables;
    await products.insert(this.manager, writes.insertProducts, this.pause);
    await this.updateAll(products, writes.updateProducts);
    await assets.insert(this.manager, writes.insertAssets.map(productLevel), this.pause);
    await this.updateAll(assets, writes.updateAssets.map(productLevel));
    await features.insert(this.manager, writes.insertFeatures, this.pause);
    await this.updateAll(features, writes.updateFeatures);
  }

  private async updateAll<Row extends { id: string }>(table: SqlTable<Row>, rows: Row[]): Promise<void> {
    for (const [index, row] of rows.entries()) {
      await table.update(this.manager, row);
      if ((index + 1) % UPDATES_PER_PAUSE === 0) await this.pause();
    }
  }

  private async takenIds(table: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = (await this.manager.query(
      `SELECT id FROM ${table} WHERE id IN (${placeholders(ids.length)})`,
      ids,
    )) as {
      id: string;
    }[];
    return new Set(rows.map((row) => row.id));
  }
}

/**
 * The catalog writes only a product's own assets (entitlements copy theirs): an entitlementId sent with one is
 * dropped, in the row itself too, so that what the caller answers is what was stored.
 */
function productLevel(row: MonitoredAssetRow): MonitoredAssetRow {
  row.entitlementId = null;
  return row;
}

function push<T extends { productId: string }>(groups: Map<string, T[]>, row: T): void {
  const group = groups.get(row.productId);
  if (group) group.push(row);
  else groups.set(row.productId, [row]);
}
