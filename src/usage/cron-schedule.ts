import { CronExpressionParser } from "cron-parser";

/** The first time a cron schedule (UTC) fires after `after`; null for a schedule that cannot be read. */
export function nextFireAfter(cron: string, after: Date): Date | null {
  try {
    return CronExpressionParser.parse(cron, { currentDate: after, tz: "UTC" }).next().toDate();
  } catch {
    return null;
  }
}
