/** Rows per page of a background job's scan. */
export const SCAN_PAGE_SIZE = 500;

/**
 * Hands every row a background job looks at to `visit`, a page at a time in id order, and gives the event loop a
 * turn between pages: however many rows there are, they are neither held in memory at once nor looked at in one
 * stretch that stalls the requests being served. `page` answers the next rows with an id after `after`, in id
 * order, at most `limit`.
 */
export async function scanInPages<Row extends { id: string }>(
  page: (after: string, limit: number) => Promise<Row[]>,
  visit: (rows: Row[]) => Promise<void>,
  pageSize = SCAN_PAGE_SIZE,
): Promise<void> {
  let after = "";
  for (;;) {
    const rows = await page(after, pageSize);
    if (rows.length > 0) await visit(rows);
    if (rows.length < pageSize) return;
    after = rows[rows.length - 1].id;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
