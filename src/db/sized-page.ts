/**
 * A keyset page cut by bytes as well as rows: the ledger listings, the approvals listing, the export, the sealer and
 * the verifier read pages whose rows may each be large, and parse, hash or send a page in one go.
 */

/**
 * The page `page` (a SELECT … ORDER BY `order` LIMIT …) cut short where the rows before a row already hold `budget`
 * (a parameter such as `$3`, or a number) of `rowBytes` (an expression over the page's columns: jsonb text as
 * PostgreSQL prints it, about its JSON size, or pg_column_size, its size as stored): the first row always comes, and
 * the rows cut are the page's last, so a cursor after the last row returned continues with them. Each row has its
 * `row_bytes`, and `page_rows`, how many rows the page held before the cut.
 */
export function sizedPageSql(page: string, rowBytes: string, budget: string, order: string): string {
  return `SELECT * FROM (
      SELECT measured.*, count(*) OVER () AS page_rows,
             coalesce(sum(row_bytes) OVER (ORDER BY ${order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS bytes_before
        FROM (SELECT page.*, ${rowBytes} AS row_bytes FROM (${page}) page) measured
    ) sized
    WHERE bytes_before < ${budget}
    ORDER BY ${order}`;
}

/** What sizedPageSql adds to each row (bigints, as pg hands them over, or numbers). */
export interface SizedRow {
  page_rows: string | number;
  row_bytes: string | number;
}

/** The bytes of `rows`, sizedPageSql rows, by their `row_bytes`: what a listing page is charged by. */
export function rowBytes(rows: readonly Pick<SizedRow, 'row_bytes'>[]): number {
  return rows.reduce((n, r) => n + Number(r.row_bytes), 0);
}

/** Whether rows may follow `rows`, a sizedPageSql page of at most `limit` rows: it was cut by bytes, or it was full. */
export function morePages(rows: readonly SizedRow[], limit: number): boolean {
  const pageRows = rows.length ? Number(rows[0].page_rows) : 0;
  return rows.length < pageRows || pageRows === limit;
}
