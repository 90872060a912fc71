import { openDatabase } from "../app.js";
import { ConfigError, loadConfig } from "../platform/config.js";
import { migrate } from "../platform/database.js";

/** `npm run migrate`: applies pending migrations to DATABASE_URL and prints what it applied as JSON. */
const [unexpected] = process.argv.slice(2);
if (unexpected !== undefined) {
  process.stderr.write(`migrate takes no arguments, not ${JSON.stringify(unexpected)}: nothing was done\n`);
  process.exit(2);
}
try {
  const dataSource = openDatabase(loadConfig());
  await dataSource.initialize();
  try {
    const applied = await migrate(dataSource);
    process.stdout.write(`${JSON.stringify({ applied })}\n`);
  } finally {
    await dataSource.destroy();
  }
} catch (error) {
  process.stderr.write(
    `${error instanceof ConfigError ? error.message : `migration failed: ${(error as Error).message}`}\n`,
  );
  process.exit(error instanceof ConfigError ? 2 : 1);
}
