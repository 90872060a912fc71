import { type DataSource, type EntityManager, In, type QueryFailedError, type SelectQueryBuilder } from "typeorm";
import { type Dialect, dialectOf, inTransaction, writeSerially } from "../platform/database.js";
import {
  FeatureEntity,
  type FeatureRow,
  MonitoredAssetEntity,
  type MonitoredAssetRow,
  ProductEntity,
  type ProductRow,
} from "./entities.js";
import { type FilterTerm, type ProductField, type SortKey, TEXT_SEARCH_FIELDS } from "./product-query.js";

export interface ProductTree {
  product: ProductRow;
  features: FeatureRow[];
  assets: MonitoredAssetRow[];
}

export interface ProductPageQuery {
  filter: FilterTerm[];
  sort: SortKey[];
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

const FREE_TEXT_COLUMNS = TEXT_SEARCH_FIELDS.map((field) => PRODUCT_COLUMNS[field]);

/** Which unique rule a write broke, from the constraint named in the driver's message. */
export type UniqueRule = "product-code" | "feature-code" | "asset-metric" | "id" | "unknown";

export function uniqueRuleOf(error: QueryFailedError): UniqueRule {
  const message = String((error.driverError as { message?: string })?.message ?? error.message);
  if (/uq_products_provider_code|products\.product_code/.test(message)) return "product-code";
  if (/uq_features_product_code|features\.feature_code/.test(message)) return "feature-code";
  if (/uq_monitored_assets_product_metric|monitored_assets\.metric_name/.test(message)) return "asset-metric";
  if (/PRIMARY|\.id\b/.test(message)) return "id";
  return "unknown";
}

/** The catalog's queries. Every product query is scoped by the owning provider. */
export class CatalogRepository {
  private readonly dialect: Dialect;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectOf(dataSource);
  }

  async listProducts(providerId: string, query: ProductPageQuery): Promise<{ rows: ProductRow[]; total: number }> {
    const builder = this.dataSource.getRepository(ProductEntity).createQueryBuilder("p");
    builder.where("p.provider_id = :providerId", { providerId });
    this.applyFilter(builder, query.filter);
    const total = await builder.getCount();
    for (const [index, key] of query.sort.entries()) {
      const column = `p.${PRODUCT_COLUMNS[key.field]}`;
      const direction = key.direction === "desc" ? "DESC" : "ASC";
      if (index === 0) builder.orderBy(column, direction);
      else builder.addOrderBy(column, direction);
    }
    builder.addOrderBy("p.id", "ASC");
    const rows = await builder.offset(query.offset).limit(query.limit).getMany();
    return { rows, total };
  }

  async findProductTree(providerId: string, productId: string): Promise<ProductTree | null> {
    const product = await this.dataSource.getRepository(ProductEntity).findOneBy({ id: productId, providerId });
    if (!product) return null;
    const children = await this.loadChildren([product.id]);
    return { product, features: children.features(product.id), assets: children.assets(product.id) };
  }

  /** Features and assets of many products in two queries. */
  async loadChildren(productIds: string[], manager: EntityManager = this.dataSource.manager) {
    const features = productIds.length
      ? await manager.getRepository(FeatureEntity).find({
          where: { productId: In(productIds) },
          order: { createdAt: "ASC", id: "ASC" },
        })
      : [];
    const assets = productIds.length
      ? await manager.getRepository(MonitoredAssetEntity).find({
          where: { productId: In(productIds) },
          order: { createdAt: "ASC", id: "ASC" },
        })
      : [];
    const featuresByProduct = groupBy(features, (row) => row.productId);
    const assetsByProduct = groupBy(assets, (row) => row.productId);
    return {
      features: (productId: string) => featuresByProduct.get(productId) ?? [],
      assets: (productId: string) => assetsByProduct.get(productId) ?? [],
    };
  }

  async insertProduct(row: ProductRow): Promise<void> {
    await writeSerially(this.dataSource, () => this.dataSource.getRepository(ProductEntity).insert(row));
  }

  /** Runs `work` in one transaction; its writes all land or none do. */
  async transaction<T>(work: (tx: CatalogTransaction) => Promise<T>): Promise<T> {
    return inTransaction(this.dataSource, (manager) => work(new CatalogTransaction(manager, this.dialect, this)));
  }

  private applyFilter(builder: SelectQueryBuilder<ProductRow>, terms: FilterTerm[]): void {
    if (!terms.some((term) => term.kind === "compare" && term.field === "isDeleted")) {
      builder.andWhere("p.is_deleted = :notDeleted", { notDeleted: false });
    }
    for (const [index, term] of terms.entries()) {
      const parameter = `f${index}`;
      if (term.kind === "text") {
        const pattern = `%${escapeLike(term.text.toLowerCase())}%`;
        const clauses = FREE_TEXT_COLUMNS.map((column) => `LOWER(p.${column}) LIKE :${parameter} ESCAPE '!'`);
        builder.andWhere(`(${clauses.join(" OR ")})`, { [parameter]: pattern });
        continue;
      }
      const column = `p.${PRODUCT_COLUMNS[term.field]}`;
      if (term.op === "~") {
        const pattern = `%${escapeLike(String(term.value).toLowerCase())}%`;
        builder.andWhere(`LOWER(${column}) LIKE :${parameter} ESCAPE '!'`, { [parameter]: pattern });
      } else if (term.op === "!=") {
        builder.andWhere(`(${column} IS NULL OR ${column} <> :${parameter})`, { [parameter]: term.value });
      } else {
        builder.andWhere(`${column} ${term.op} :${parameter}`, { [parameter]: term.value });
      }
    }
  }
}

/** Catalog writes inside one transaction; products are locked before they are changed. */
export class CatalogTransaction {
  constructor(
    private readonly manager: EntityManager,
    private readonly dialect: Dialect,
    private readonly repository: CatalogRepository,
  ) {}

  async lockProduct(providerId: string, productId: string): Promise<ProductRow | null> {
    const builder = this.manager
      .getRepository(ProductEntity)
      .createQueryBuilder("p")
      .where("p.id = :productId AND p.provider_id = :providerId", { productId, providerId });
    if (this.dialect === "mysql") builder.setLock("pessimistic_write");
    return builder.getOne();
  }

  async lockProductByCode(providerId: string, productCode: string): Promise<ProductRow | null> {
    const builder = this.manager
      .getRepository(ProductEntity)
      .createQueryBuilder("p")
      .where("p.provider_id = :providerId AND p.product_code = :productCode", { providerId, productCode });
    if (this.dialect === "mysql") builder.setLock("pessimistic_write");
    return builder.getOne();
  }

  /** The provider owning the product with this id, if there is one; ids are unique across providers. */
  async productOwner(productId: string): Promise<string | null> {
    const row = await this.manager
      .getRepository(ProductEntity)
      .findOne({ where: { id: productId }, select: { providerId: true } });
    return row?.providerId ?? null;
  }

  async featureIdTaken(featureId: string): Promise<boolean> {
    return (await this.manager.getRepository(FeatureEntity).countBy({ id: featureId })) > 0;
  }

  async assetIdTaken(assetId: string): Promise<boolean> {
    return (await this.manager.getRepository(MonitoredAssetEntity).countBy({ id: assetId })) > 0;
  }

  async children(productId: string) {
    const children = await this.repository.loadChildren([productId], this.manager);
    return { features: children.features(productId), assets: children.assets(productId) };
  }

  async insertProduct(row: ProductRow): Promise<void> {
    await this.manager.getRepository(ProductEntity).insert(row);
  }

  async updateProduct(row: ProductRow): Promise<void> {
    const { id, ...changes } = row;
    await this.manager.getRepository(ProductEntity).update({ id }, changes);
  }

  async insertFeature(row: FeatureRow): Promise<void> {
    await this.manager.getRepository(FeatureEntity).insert(row);
  }

  async updateFeature(row: FeatureRow): Promise<void> {
    const { id, ...changes } = row;
    await this.manager.getRepository(FeatureEntity).update({ id }, changes);
  }

  async insertAsset(row: MonitoredAssetRow): Promise<void> {
    await this.manager.getRepository(MonitoredAssetEntity).insert(row);
  }

  async updateAsset(row: MonitoredAssetRow): Promise<void> {
    const { id, ...changes } = row;
    await this.manager.getRepository(MonitoredAssetEntity).update({ id }, changes);
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

function escapeLike(text: string): string {
  return text.replace(/[!%_]/g, (character) => `!${character}`);
}
