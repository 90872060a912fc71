import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import type { QueryResult } from "typeorm/query-runner/QueryResult.js";
import { SchedulerLeaseEntity } from "../webhooks/entities.js";
import type { Clock } from "./clock.js";
import { isUniqueViolation, writeSerially } from "./database.js";

/**
 * A named lease in the database: the instance holding it runs the time-driven work. It is renewed while
 * held; when its holder dies it expires and another instance takes it over. Works the same on MySQL and
 * SQLite, and with an injected clock.
 */
export class SchedulerLease {
  readonly holder = randomUUID();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly name: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes or renews the lease; true while this instance holds it. */
  async acquire(): Promise<boolean> {
    const now = this.clock.now();
    const expires = new Date(now.getTime() + this.ttlMs);
    const taken = await this.update(
      // acquired_at first: MySQL assigns left to right, so a later assignment would see the new holder.
      "UPDATE scheduler_leases SET acquired_at = CASE WHEN holder = ? THEN acquired_at ELSE ? END, holder = ?, expires_at = ? WHERE name = ? AND (holder = ? OR expires_at <= ?)",
      [this.holder, this.date(now), this.holder, this.date(expires), this.name, this.holder, this.date(now)],
    );
    if (taken > 0) return true;
    try {
      await writeSerially(this.dataSource, () =>
        this.dataSource.query(
          "INSERT INTO scheduler_leases (name, holder, expires_at, acquired_at) VALUES (?, ?, ?, ?)",
          [this.name, this.holder, this.date(expires), this.date(now)],
        ),
      );
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  /** Gives the lease up at once (on shutdown), so another instance need not wait for it to expire. */
  async release(): Promise<void> {
    await this.update("UPDATE scheduler_leases SET expires_at = ? WHERE name = ? AND holder = ?", [
      this.date(new Date(0)),
      this.name,
      this.holder,
    ]);
  }

  private async update(sql: string, parameters: unknown[]): Promise<number> {
    return writeSerially(this.dataSource, async () => {
      const runner = this.dataSource.createQueryRunner();
      try {
        return ((await runner.query(sql, parameters, true)) as QueryResult).affected ?? 0;
      } finally {
        await runner.release();
      }
    });
  }

  private date(value: Date): unknown {
    const column = this.dataSource
      .getMetadata(SchedulerLeaseEntity)
      .columns.find((c) => c.propertyName === "expiresAt");
    return this.dataSource.driver.preparePersistentValue(value, column as never);
  }
}
