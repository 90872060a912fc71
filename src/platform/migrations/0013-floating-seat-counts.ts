import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";
import { columnsFor, ownerCountTable } from "./columns.js";

const HOLDS = new TableColumn({ name: "holds_floating_seat", type: "boolean", isNullable: false, default: false });
const HOLDS_INDEX = "ix_license_sessions_seat_holds";
/** Served only the count this replaces: one index fewer for each renewal's new grace end to update. */
const SEATS_INDEX = new TableIndex({
  name: "ix_license_sessions_seats",
  columnNames: ["entitlement_id", "state", "is_floating", "grace_ends_at"],
});

/**
 * Floating seats counted, not scanned: an activation counted every live floating session of its entitlement
 * under the entitlement's lock, so its cost (and the time others waited for the lock) grew with the seats in
 * use. Each entitlement's floating sessions holding a seat are now counted in `floating_seat_counts.held`,
 * beside a time no held seat's grace ends before (`earliest_end`); a session gives its seat back when it ends,
 * is released, or is found lapsed by the next activation after `earliest_end`.
 */
export class FloatingSeatCounts1764777600000 implements MigrationInterface {
  name = "FloatingSeatCounts1764777600000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.addColumn("license_sessions", HOLDS);
    await queryRunner.dropIndex("license_sessions", SEATS_INDEX.name as string);
    await queryRunner.createIndex(
      "license_sessions",
      new TableIndex({ name: HOLDS_INDEX, columnNames: ["entitlement_id", "holds_floating_seat", "grace_ends_at"] }),
    );
    await queryRunner.createTable(
      ownerCountTable(c, {
        name: "floating_seat_counts",
        owner: "entitlement_id",
        ownerTable: "entitlements",
        foreignKey: "fk_floating_seat_counts_entitlement",
        more: [c.datetime("earliest_end", true)],
      }),
    );
    // Booleans are 1 and 0 on both databases (MySQL's BOOLEAN is TINYINT(1)); state 1 is live.
    await queryRunner.query("UPDATE license_sessions SET holds_floating_seat = 1 WHERE state = 1 AND is_floating = 1");
    await queryRunner.query(
      "INSERT INTO floating_seat_counts (entitlement_id, held, earliest_end) " +
        "SELECT entitlement_id, COUNT(*), MIN(grace_ends_at) FROM license_sessions WHERE holds_floating_seat = 1 " +
        "GROUP BY entitlement_id",
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("floating_seat_counts");
    await queryRunner.dropIndex("license_sessions", HOLDS_INDEX);
    await queryRunner.createIndex("license_sessions", SEATS_INDEX);
    await queryRunner.dropColumn("license_sessions", HOLDS.name);
  }
}
