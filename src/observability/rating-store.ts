import type { DataSource, EntityManager } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { SqlTable } from "../catalog/sql-table.js";
import { RatingEntity, type RatingRow } from "./entities.js";

export interface RatingQuery {
  providerId: string;
  /** Empty: every product (feature). */
  productId: string;
  featureId: string;
  /** Inclusive; unbounded when null. */
  from: Date | null;
  /** Exclusive; unbounded when null. */
  to: Date | null;
  offset: number;
  limit: number;
}

/** The SQL of ratings, and of what a rating must name: a product of the session's entitlement and its features. */
export class RatingStore {
  readonly ratings: SqlTable<RatingRow>;
  private readonly dateColumn: ColumnMetadata;

  constructor(private readonly dataSource: DataSource) {
    this.ratings = new SqlTable(dataSource, RatingEntity);
    this.dateColumn = this.ratings.columns.find((column) => column.propertyName === "createdAt") as ColumnMetadata;
  }

  async isLicensedProduct(manager: EntityManager, entitlementId: string, productId: string): Promise<boolean> {
    const rows = (await manager.query(
      "SELECT 1 AS present FROM entitlement_products WHERE entitlement_id = ? AND product_id = ?",
      [entitlementId, productId],
    )) as unknown[];
    return rows.length > 0;
  }

  /**
   * The catalog id of a feature of the product: `featureId` is the entitlement's copy of it (the id a license
   * token's `fea` claim names a feature without a code by) or the catalog feature itself, live; null for none.
   */
  async catalogFeatureId(
    manager: EntityManager,
    entitlementId: string,
    productId: string,
    featureId: string,
  ): Promise<string | null> {
    const [copy] = (await manager.query(
      "SELECT source_feature_id AS id FROM entitlement_features " +
        "WHERE entitlement_id = ? AND product_id = ? AND (id = ? OR source_feature_id = ?)",
      [entitlementId, productId, featureId, featureId],
    )) as { id: string }[];
    if (copy) return copy.id;
    const [feature] = (await manager.query(
      "SELECT id FROM features WHERE id = ? AND product_id = ? AND is_deleted = 0",
      [featureId, productId],
    )) as { id: string }[];
    return feature?.id ?? null;
  }

  /** A page of the provider's ratings, newest first, with the count and the sum of every rating selected. */
  async page(manager: EntityManager, query: RatingQuery) {
    const { where, parameters } = this.filter(query);
    const [totals] = (await manager.query(
      `SELECT COUNT(*) AS n, SUM(rating) AS total FROM ratings WHERE ${where}`,
      parameters,
    )) as { n: unknown; total: unknown }[];
    const count = Number(totals?.n ?? 0);
    const sum = Number(totals?.total ?? 0);
    if (count === 0 || query.offset >= count) return { rows: [], count, sum };
    const { rows } = await this.ratings.page(manager, {
      where,
      parameters,
      order: "created_at DESC, id DESC",
      offset: query.offset,
      limit: query.limit,
    });
    return { rows, count, sum };
  }

  private filter(query: RatingQuery): { where: string; parameters: unknown[] } {
    const clauses = ["provider_id = ?"];
    const parameters: unknown[] = [query.providerId];
    const add = (clause: string, value: unknown) => {
      clauses.push(clause);
      parameters.push(value);
    };
    if (query.productId) add("product_id = ?", query.productId);
    if (query.featureId) add("feature_id = ?", query.featureId);
    if (query.from) add("created_at >= ?", this.date(query.from));
    if (query.to) add("created_at < ?", this.date(query.to));
    return { where: clauses.join(" AND "), parameters };
  }

  private date(value: Date): unknown {
    return this.dataSource.driver.preparePersistentValue(value, this.dateColumn);
  }
}
