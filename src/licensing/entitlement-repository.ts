import type { DataSource, EntityManager, QueryFailedError } from "typeorm";
import type { Product } from "../../gen/provision/v1/catalog_pb.js";
import type { Entitlement } from "../../gen/provision/v1/entitlement_pb.js";
import type { CatalogRepository } from "../catalog/catalog-repository.js";
import type { FeatureRow, MonitoredAssetRow, ProductRow } from "../catalog/entities.js";
import { toProduct } from "../catalog/product-mapper.js";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import { dialectOf, forUpdate, readSerially, yieldToEventLoop } from "../platform/database.js";
import { filterClauses, orderSql } from "../platform/list-query.js";
import {
  EntitlementEntity,
  EntitlementFeatureEntity,
  type EntitlementFeatureRow,
  type EntitlementRow,
} from "./entities.js";
import { toEntitlement } from "./entitlement-mapper.js";
import {
  ENTITLEMENT_COLUMNS,
  ENTITLEMENT_LIST,
  type EntitlementField,
  type EntitlementFilterTerm,
  type EntitlementSortKey,
  entitlementPropertyOf,
} from "./entitlement-query.js";

/** What an entitlement holds besides its own row: product links (in order), features and usage assets. */
export interface EntitlementContents {
  productIds: string[];
  features: EntitlementFeatureRow[];
  assets: MonitoredAssetRow[];
}

export interface EntitlementPageQuery {
  filter: EntitlementFilterTerm[];
  sort: EntitlementSortKey[];
  offset: number;
  limit: number;
}

/** Which unique rule a write broke, from the constraint named in the driver's message. */
export function entitlementUniqueRuleOf(error: QueryFailedError): "license-key" | "template" | "unknown" {
  const message = String((error.driverError as { message?: string })?.message ?? error.message);
  if (/uq_entitlements_provider_license_key|entitlements\.license_key/.test(message)) return "license-key";
  if (/uq_entitlements_provider_template|entitlements\.template_name/.test(message)) return "template";
  return "unknown";
}

const repositories = new WeakMap<DataSource, EntitlementRepository>();

/** The repository of a data source, built once. */
export function entitlementRepository(dataSource: DataSource, catalog: CatalogRepository): EntitlementRepository {
  let repository = repositories.get(dataSource);
  if (!repository) {
    repository = new EntitlementRepository(dataSource, catalog);
    repositories.set(dataSource, repository);
  }
  return repository;
}

/** Entitlements and what they hold, as SQL; every entitlement query is scoped by the owning provider. */
export class EntitlementRepository {
  private readonly entitlements: SqlTable<EntitlementRow>;
  private readonly features: SqlTable<EntitlementFeatureRow>;
  private readonly products: SqlTable<ProductRow>;
  private readonly catalogFeatures: SqlTable<FeatureRow>;
  private readonly assets: SqlTable<MonitoredAssetRow>;
  private readonly updateSql: string;
  private readonly productColumnsOfJoin: string;

  constructor(
    private readonly dataSource: DataSource,
    catalog: CatalogRepository,
  ) {
    this.entitlements = new SqlTable(dataSource, EntitlementEntity);
    this.features = new SqlTable(dataSource, EntitlementFeatureEntity);
    this.products = catalog.tables.products;
    this.catalogFeatures = catalog.tables.features;
    this.assets = catalog.tables.assets;
    const quote = (name: string) => dataSource.driver.escape(name);
    const assigned = this.entitlements.columns.filter((column) => !["id", "revision"].includes(column.propertyName));
    this.updateSql = `UPDATE ${this.entitlements.name} SET ${assigned
      .map((column) => `${quote(column.databaseName)} = ?`)
      .join(", ")}, revision = revision + 1 WHERE id = ?`;
    this.productColumnsOfJoin = this.products.columns.map((column) => `p.${quote(column.databaseName)}`).join(", ");
  }

  /** The provider's entitlement; locked for the transaction's writes when `lock` (MySQL). */
  async find(manager: EntityManager, providerId: string, id: string, lock = false): Promise<EntitlementRow | null> {
    const [row] = await this.entitlements.select(
      manager,
      `id = ? AND provider_id = ?${lock ? forUpdate(dialectOf(this.dataSource)) : ""}`,
      [id, providerId],
    );
    return row ?? null;
  }

  /** The provider's template of that name (and version, when not empty): the most recently created one. */
  async findTemplateByName(
    manager: EntityManager,
    providerId: string,
    name: string,
    version: string,
  ): Promise<EntitlementRow | null> {
    const byVersion = version === "" ? "" : " AND template_version = ?";
    const [row] = await this.entitlements.select(
      manager,
      `provider_id = ? AND is_template = 1 AND template_name = ?${byVersion} ORDER BY created_at DESC, id DESC LIMIT 1`,
      version === "" ? [providerId, name] : [providerId, name, version],
    );
    return row ?? null;
  }

  /** A page of the provider's entitlements and their total count. */
  async page(providerId: string, query: EntitlementPageQuery): Promise<{ rows: EntitlementRow[]; total: number }> {
    const filter = filterClauses(ENTITLEMENT_LIST, query.filter, (field, value) => this.columnValue(field, value));
    return this.entitlements.page(this.dataSource.manager, {
      where: ["provider_id = ?", ...filter.clauses].join(" AND "),
      parameters: [providerId, ...filter.parameters],
      order: orderSql(ENTITLEMENT_COLUMNS, query.sort),
      offset: query.offset,
      limit: query.limit,
    });
  }

  /** Reads outside a transaction, after any write under way on SQLite. */
  read<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return readSerially(this.dataSource, () => work(this.dataSource.manager));
  }

  async insert(manager: EntityManager, row: EntitlementRow, contents: EntitlementContents): Promise<void> {
    await this.entitlements.insert(manager, [row]);
    await this.insertContents(manager, row.id, contents);
  }

  /** Writes every column of `row` and increments its revision (in the row too). */
  async update(manager: EntityManager, row: EntitlementRow): Promise<void> {
    const assigned = this.entitlements.columns.filter((column) => !["id", "revision"].includes(column.propertyName));
    const record = row as unknown as Record<string, unknown>;
    const values = assigned.map((column) =>
      this.dataSource.driver.preparePersistentValue(record[column.propertyName] ?? null, column),
    );
    await manager.query(this.updateSql, [...values, row.id]);
    row.revision += 1;
  }

  async updateFeature(manager: EntityManager, row: EntitlementFeatureRow): Promise<void> {
    await this.features.update(manager, row);
  }

  /** The provider's live products among `ids`. */
  async catalogProducts(manager: EntityManager, providerId: string, ids: string[]): Promise<ProductRow[]> {
    if (ids.length === 0) return [];
    return this.products.select(manager, `provider_id = ? AND is_deleted = 0 AND id IN (${placeholders(ids.length)})`, [
      providerId,
      ...ids,
    ]);
  }

  /** The live features and the catalog's own monitored assets (no entitlement's copies) of these products. */
  async catalogChildren(
    manager: EntityManager,
    productIds: string[],
  ): Promise<{ features: FeatureRow[]; assets: MonitoredAssetRow[] }> {
    if (productIds.length === 0) return { features: [], assets: [] };
    const list = placeholders(productIds.length);
    const features = await this.catalogFeatures.select(
      manager,
      `product_id IN (${list}) AND is_deleted = 0 ORDER BY created_at, id`,
      productIds,
    );
    const assets = await this.assets.select(
      manager,
      `product_id IN (${list}) AND entitlement_id IS NULL ORDER BY created_at, id`,
      productIds,
    );
    return { features, assets };
  }

  /** The products, features and assets an entitlement holds. */
  async contentsOf(manager: EntityManager, entitlementId: string): Promise<EntitlementContents> {
    const links = (await manager.query(
      "SELECT product_id FROM entitlement_products WHERE entitlement_id = ? ORDER BY position",
      [entitlementId],
    )) as { product_id: string }[];
    return {
      productIds: links.map((link) => link.product_id),
      features: await this.featuresOf(manager, [entitlementId]),
      assets: await this.assets.select(manager, "entitlement_id = ? ORDER BY metric_name, id", [entitlementId]),
    };
  }

  /** The features of these entitlements, by entitlement, then product order, then featureCode. */
  async featuresOf(manager: EntityManager, entitlementIds: string[]): Promise<EntitlementFeatureRow[]> {
    if (entitlementIds.length === 0) return [];
    const columns = this.features.columns.map((column) => `f.${this.quote(column.databaseName)}`).join(", ");
    const raw = (await manager.query(
      `SELECT ${columns} FROM ${this.features.name} f LEFT JOIN entitlement_products ep ON ep.entitlement_id = f.entitlement_id AND ep.product_id = f.product_id WHERE f.entitlement_id IN (${placeholders(entitlementIds.length)}) ORDER BY f.entitlement_id, ep.position, f.feature_code, f.name, f.id`,
      entitlementIds,
    )) as Record<string, unknown>[];
    return raw.map((row) => this.features.hydrate(row));
  }

  /**
   * The full entitlements of `rows`, in their order, in four queries whatever their number: products (as the
   * catalog holds them, with their live features) and each entitlement's own features and usage assets.
   */
  async views(manager: EntityManager, rows: EntitlementRow[]): Promise<Entitlement[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((row) => row.id);
    const list = placeholders(ids.length);
    const linked = (await manager.query(
      `SELECT ep.entitlement_id AS link_entitlement_id, ${this.productColumnsOfJoin} FROM entitlement_products ep JOIN ${this.products.name} p ON p.id = ep.product_id WHERE ep.entitlement_id IN (${list}) ORDER BY ep.entitlement_id, ep.position`,
      ids,
    )) as Record<string, unknown>[];
    const productIds = [...new Set(linked.map((row) => String(row.id)))];
    const catalogFeatures = productIds.length
      ? await this.catalogFeatures.select(
          manager,
          `product_id IN (${placeholders(productIds.length)}) AND is_deleted = 0 ORDER BY created_at, id`,
          productIds,
        )
      : [];
    const features = await this.featuresOf(manager, ids);
    // Copies are made together (one creation time): ordered by metric name, as features are by code.
    const assets = await this.assets.select(manager, `entitlement_id IN (${list}) ORDER BY metric_name, id`, ids);
    const featuresOfProduct = groupBy(catalogFeatures, (row) => row.productId);
    const featuresOfEntitlement = groupBy(features, (row) => row.entitlementId);
    const assetsOfEntitlement = groupBy(assets, (row) => row.entitlementId ?? "");
    const productsOfEntitlement = new Map<string, Product[]>();
    for (const raw of linked) {
      const entitlementId = String(raw.link_entitlement_id);
      const product = this.products.hydrate(raw);
      const ownAssets = (assetsOfEntitlement.get(entitlementId) ?? []).filter(
        (asset) => asset.productId === product.id,
      );
      const view = toProduct(product, featuresOfProduct.get(product.id) ?? [], ownAssets);
      const products = productsOfEntitlement.get(entitlementId);
      if (products) products.push(view);
      else productsOfEntitlement.set(entitlementId, [view]);
    }
    return rows.map((row) =>
      toEntitlement(row, productsOfEntitlement.get(row.id) ?? [], featuresOfEntitlement.get(row.id) ?? []),
    );
  }

  /** The only writer of an entitlement's product links: they never change after (EntitlementProductCache). */
  private async insertContents(manager: EntityManager, entitlementId: string, contents: EntitlementContents) {
    const pause = () => yieldToEventLoop(this.dataSource);
    if (contents.productIds.length > 0) {
      await manager.query(
        `INSERT INTO entitlement_products (entitlement_id, product_id, position) VALUES ${contents.productIds
          .map(() => "(?, ?, ?)")
          .join(", ")}`,
        contents.productIds.flatMap((productId, position) => [entitlementId, productId, position]),
      );
    }
    await this.assets.insert(manager, contents.assets, pause);
    await this.features.insert(manager, contents.features, pause);
  }

  /** A filter value as the driver stores it in the field's column (booleans as 1/0, dates per dialect). */
  private columnValue(field: EntitlementField, value: unknown): unknown {
    const property = entitlementPropertyOf(field);
    const column = this.entitlements.columns.find((candidate) => candidate.propertyName === property);
    return column ? this.dataSource.driver.preparePersistentValue(value, column) : value;
  }

  private quote(name: string): string {
    return this.dataSource.driver.escape(name);
  }
}

function groupBy<T>(rows: T[], keyOf: (row: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const key = keyOf(row);
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return groups;
}
