/**
 * The run-wide leak scan (issue 7): once every test file has run, the test
 * secrets appear nowhere outside the encrypted columns: not in the run log
 * (every in-process log line and every child's stdout/stderr, run-log.ts) and
 * not in any row of any table of the test database. Findings name the
 * secret's variable and the form it was found in, never its value.
 *
 * Runs in vitest's main process (global-setup.ts teardown): no vitest imports.
 */
import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { NAMED_TEST_SECRETS } from './secrets.js';

export interface Needle {
  /** the variable in secrets.ts */
  name: string;
  /** how it is written: plain, url-encoded, base64, hex … */
  form: string;
  text: string;
}

/** The encrypted columns: AES-GCM ciphertext, the only place a secret may be (as ciphertext). */
export const ENCRYPTED_COLUMNS = ['integration_credentials.ciphertext', 'tool_call_results.ciphertext', 'tool_call_inputs.ciphertext', 'vendor_tokens.ciphertext'];

/**
 * Every form a secret could leak in: as is, URL-encoded (form bodies, query
 * strings), base64 at each of the three byte alignments (inside a larger
 * base64 blob, e.g. a Basic header), the raw key bytes of a base64 master key,
 * and the hex of each (bytea columns read as \x… text).
 */
export function secretForms(secrets: Readonly<Record<string, string>> = NAMED_TEST_SECRETS): Needle[] {
  const out: Needle[] = [];
  const seen = new Set<string>();
  const add = (name: string, form: string, text: string): void => {
    if (text.length < 8 || seen.has(`${name}\0${text}`)) return;
    seen.add(`${name}\0${text}`);
    out.push({ name, form, text });
  };
  for (const [name, value] of Object.entries(secrets)) {
    const bytes = Buffer.from(value, 'utf8');
    const textual: [string, string][] = [
      ['plain', value],
      ['url-encoded', encodeURIComponent(value)],
      ['base64', bytes.toString('base64')],
      ['base64url', bytes.toString('base64url')],
    ];
    for (const shift of [1, 2]) {
      // The secret at byte offset 3k+shift of a longer blob: the base64 characters that depend on its bytes alone.
      const start = 3 - shift;
      const whole = Math.floor((bytes.length - start) / 3) * 3;
      if (whole > 0) textual.push([`base64 (in a blob, offset ${shift})`, bytes.subarray(start, start + whole).toString('base64')]);
    }
    const raw = Buffer.from(value, 'base64');
    if (raw.length >= 16 && raw.toString('base64') === value) {
      textual.push(['raw key bytes (hex)', raw.toString('hex')]);
    }
    for (const [form, text] of textual) add(name, form, text);
    for (const [form, text] of textual) if (!form.endsWith('(hex)')) add(name, `${form}, as bytes (hex)`, Buffer.from(text, 'utf8').toString('hex'));
  }
  return out;
}

export interface Finding {
  needle: Needle;
  where: string;
  count: number;
}

/** Scans the run log line by line; a finding names the first line and every test file/source it came from. */
export async function scanRunLog(path: string, needles: Needle[]): Promise<{ lines: number; findings: Finding[] }> {
  if (!existsSync(path)) return { lines: 0, findings: [] };
  const found = new Map<Needle, { first: number; count: number; sources: Set<string> }>();
  let lines = 0;
  const rl = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of rl) {
    lines++;
    for (const n of needles) {
      if (!line.includes(n.text)) continue;
      const tab = line.indexOf('\t');
      const source = tab > 0 ? line.slice(0, tab) : 'unlabelled';
      const f = found.get(n);
      if (f) {
        f.count++;
        f.sources.add(source);
      } else found.set(n, { first: lines, count: 1, sources: new Set([source]) });
    }
  }
  const findings = [...found].map(([needle, f]) => ({
    needle,
    where: `the run log (first at line ${f.first}; from ${[...f.sources].slice(0, 5).join('; ')}${f.sources.size > 5 ? `; and ${f.sources.size - 5} more sources` : ''})`,
    count: f.count,
  }));
  return { lines, findings };
}

/**
 * Scans every row of every table of the database (system schemas aside):
 * each row as JSON text (bytea as \x hex, so the hex needles find secrets in
 * decoded bytes), without the encrypted ciphertext columns. A finding names
 * the table, the column and how many rows.
 */
export async function scanDatabase(url: string, needles: Needle[]): Promise<{ tables: number; rows: number; findings: Finding[] }> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const cols = (
      await db.query<{ schema: string; table: string; column: string }>(
        `SELECT c.table_schema AS schema, c.table_name AS table, c.column_name AS column
           FROM information_schema.columns c
           JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
          WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema') AND c.table_schema NOT LIKE 'pg_toast%'
          ORDER BY c.table_schema, c.table_name, c.ordinal_position`,
      )
    ).rows;
    const tables = new Map<string, { schema: string; table: string; columns: string[] }>();
    for (const c of cols) {
      const key = `${c.schema}.${c.table}`;
      if (!tables.has(key)) tables.set(key, { schema: c.schema, table: c.table, columns: [] });
      if (!ENCRYPTED_COLUMNS.includes(`${c.table}.${c.column}`)) tables.get(key)!.columns.push(c.column);
    }
    const texts = needles.map((n) => n.text);
    const findings: Finding[] = [];
    let rowCount = 0;
    const q = (s: string): string => `"${s.replace(/"/g, '""')}"`;
    for (const { schema, table, columns } of tables.values()) {
      if (columns.length === 0) continue;
      const from = `${q(schema)}.${q(table)}`;
      rowCount += (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${from}`)).rows[0].n;
      // Each row as JSON text (bytea → "\\x…" hex), the encrypted columns left out …
      const rowHits = (
        await db.query<{ i: number }>(
          `SELECT DISTINCT n.i::int AS i
             FROM (SELECT row_to_json(r)::text AS j FROM (SELECT ${columns.map(q).join(', ')} FROM ${from}) r) v,
                  unnest($1::text[]) WITH ORDINALITY AS n(needle, i)
            WHERE strpos(v.j, n.needle) > 0`,
          [texts],
        )
      ).rows;
      if (rowHits.length === 0) continue;
      // … and where something was found, per column, so the finding can say where.
      const perColumn = columns.map((c) => `SELECT ${db.escapeLiteral(c)} AS col, to_json(x.${q(c)})::text AS v FROM ${from} x`).join(' UNION ALL ');
      const hits = (
        await db.query<{ col: string; i: number; n: number }>(
          `SELECT v.col, n.i::int AS i, count(*)::int AS n
             FROM (${perColumn}) v, unnest($1::text[]) WITH ORDINALITY AS n(needle, i)
            WHERE v.v IS NOT NULL AND strpos(v.v, n.needle) > 0
            GROUP BY v.col, n.i`,
          [texts],
        )
      ).rows;
      if (hits.length === 0) findings.push(...rowHits.map((h) => ({ needle: needles[h.i - 1], where: `table ${table} (across columns)`, count: 1 })));
      for (const h of hits) findings.push({ needle: needles[h.i - 1], where: `table ${schema === 'public' ? '' : `${schema}.`}${table}, column ${h.col}`, count: h.n });
    }
    return { tables: tables.size, rows: rowCount, findings };
  } finally {
    await db.end();
  }
}

/** "SHOPIFY_TOKEN (plain) in table tool_calls, column input: 2 row(s)": never the value. */
export function describeFinding(f: Finding, unit: string): string {
  return `${f.needle.name} (${f.needle.form}) in ${f.where}: ${f.count} ${unit}`;
}
