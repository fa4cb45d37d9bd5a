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
  /** what is searched for: a whole form, or for a long secret the start of its forms (SECRET_WINDOW) */
  text: string;
  /** the forms `text` is (or starts), first the one it is named by: plain, url-encoded, base64, hex … */
  forms: { form: string; whole: string }[];
  /** when `text` is a start: how many characters of the secret it holds */
  window?: number;
}

/** The encrypted columns: AES-GCM ciphertext, the only place a secret may be (as ciphertext). */
export const ENCRYPTED_COLUMNS = ['integration_credentials.ciphertext', 'tool_call_results.ciphertext', 'tool_call_inputs.ciphertext', 'vendor_tokens.ciphertext'];

/**
 * A secret of 20 characters or more is searched for by its first min(24, length - 4) characters, in each form:
 * that finds it cut short too (a log field or an error message sliced to a length), and finds the whole as well,
 * so the start replaces the whole form rather than adding a string to look for. 16 characters and more of a test
 * secret do not occur by chance, and no two secrets start alike.
 */
export const SECRET_WINDOW = { minLength: 20, of: (length: number): number => Math.min(24, length - 4) };

/** What some encoder escapes: every character encodeURIComponent does not leave as it is (| = + / …). */
const ESCAPABLE = /[^A-Za-z0-9\-_.!~*'()]/g;
const uEscape = (upper: boolean) => (c: string): string => {
  const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
  return `\\u${upper ? hex.toUpperCase() : hex}`;
};

/**
 * The textual forms of `value`: as is; URL-encoded (form bodies, query strings), with upper- and lower-case hex
 * (Atzr%7C…, Atzr%7c…); \u-escaped as some JSON encoders write it (Atzr\u007c…), and that text inside a JSON
 * string again (a logged raw body, a text column as row_to_json writes it: Atzr\\u007c…); base64 at each of
 * the three byte alignments (inside a larger base64 blob, e.g. a Basic header). Of a secret's start (`cut`),
 * base64 of whole 3-byte groups only: the last group's characters depend on what followed.
 */
function textualForms(value: string, cut: boolean): [string, string][] {
  const bytes = Buffer.from(value, 'utf8');
  const b64 = (b: Buffer, encoding: 'base64' | 'base64url'): string => (cut ? b.subarray(0, b.length - (b.length % 3)) : b).toString(encoding);
  const url = encodeURIComponent(value);
  const uLower = value.replace(ESCAPABLE, uEscape(false));
  const uUpper = value.replace(ESCAPABLE, uEscape(true));
  const forms: [string, string][] = [
    ['plain', value],
    ['url-encoded', url],
    ['url-encoded, lower-case hex', url.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase())],
    ['\\u-escaped', uLower],
    ['\\u-escaped, upper-case hex', uUpper],
    ['\\u-escaped inside a JSON string', uLower.replaceAll('\\', '\\\\')],
    ['\\u-escaped inside a JSON string, upper-case hex', uUpper.replaceAll('\\', '\\\\')],
    ['base64', b64(bytes, 'base64')],
    ['base64url', b64(bytes, 'base64url')],
  ];
  for (const shift of [1, 2]) {
    // The secret at byte offset 3k+shift of a longer blob: the base64 characters that depend on its bytes alone.
    const start = 3 - shift;
    const whole = Math.floor((bytes.length - start) / 3) * 3;
    if (whole > 0) forms.push([`base64 (in a blob, offset ${shift})`, bytes.subarray(start, start + whole).toString('base64')]);
  }
  return forms;
}

/**
 * Every form a secret could leak in (textualForms), the raw bytes of a base64 AES-256 master key, and the hex of
 * each (bytea columns read as \\x… text). Forms that are (or start with) the same text are one needle.
 */
export function secretForms(secrets: Readonly<Record<string, string>> = NAMED_TEST_SECRETS): Needle[] {
  const out: Needle[] = [];
  const byText = new Map<string, Needle>();
  const add = (name: string, form: string, text: string, whole: string, window?: number): void => {
    if (text.length < 8) return;
    const key = `${name}\0${text}`;
    const n = byText.get(key);
    if (!n) {
      const needle: Needle = { name, text, forms: [{ form, whole }], window };
      byText.set(key, needle);
      out.push(needle);
    } else if (!n.forms.some((f) => f.whole === whole)) n.forms.push({ form, whole });
  };
  for (const [name, value] of Object.entries(secrets)) {
    const window = value.length >= SECRET_WINDOW.minLength ? SECRET_WINDOW.of(value.length) : undefined;
    const wholes = textualForms(value, false);
    const starts = new Map(window === undefined ? wholes : textualForms(value.slice(0, window), true));
    const forms = wholes.map(([form, whole]) => ({ form, whole, text: starts.get(form) ?? whole }));
    const raw = Buffer.from(value, 'base64');
    if (raw.length === 32 && raw.toString('base64') === value) {
      const rawWindow = SECRET_WINDOW.of(raw.length);
      forms.push({ form: 'raw key bytes (hex)', whole: raw.toString('hex'), text: raw.subarray(0, rawWindow).toString('hex') });
    }
    const hex = (s: string): string => Buffer.from(s, 'utf8').toString('hex');
    for (const f of forms) add(name, f.form, f.text, f.whole, f.text === f.whole ? undefined : window);
    for (const f of forms) {
      if (!f.form.endsWith('(hex)')) add(name, `${f.form}, as bytes (hex)`, hex(f.text), hex(f.whole), f.text === f.whole ? undefined : window);
    }
  }
  return out;
}

/** The form of a hit: n.forms[index], the first whole form the text holds; -1 when it holds none, a secret cut short. */
function formName(n: Needle, index: number): string {
  return index < 0 ? `${n.forms[0]!.form}, cut short: its first ${n.window} characters` : n.forms[index]!.form;
}

export interface Finding {
  needle: Needle;
  /** the form it was found in (Needle.forms), or the secret cut short */
  form: string;
  where: string;
  count: number;
}

/** Scans the run log line by line; a finding names the first line and every test file/source it came from. */
export async function scanRunLog(path: string, needles: Needle[]): Promise<{ lines: number; findings: Finding[] }> {
  if (!existsSync(path)) return { lines: 0, findings: [] };
  const found = new Map<string, { needle: Needle; form: string; first: number; count: number; sources: Set<string> }>();
  let lines = 0;
  const rl = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of rl) {
    lines++;
    for (const n of needles) {
      if (!line.includes(n.text)) continue;
      const tab = line.indexOf('\t');
      const source = tab > 0 ? line.slice(0, tab) : 'unlabelled';
      const form = formName(n, n.forms.findIndex((w) => line.includes(w.whole)));
      const f = found.get(`${n.name}\0${n.text}\0${form}`);
      if (f) {
        f.count++;
        f.sources.add(source);
      } else found.set(`${n.name}\0${n.text}\0${form}`, { needle: n, form, first: lines, count: 1, sources: new Set([source]) });
    }
  }
  const findings = [...found.values()].map((f) => ({
    needle: f.needle,
    form: f.form,
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
    const wholes = JSON.stringify(needles.map((n) => n.forms.map((f) => f.whole)));
    const findings: Finding[] = [];
    let rowCount = 0;
    const q = (s: string): string => `"${s.replace(/"/g, '""')}"`;
    for (const { schema, table, columns } of tables.values()) {
      if (columns.length === 0) continue;
      const from = `${q(schema)}.${q(table)}`;
      rowCount += (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${from}`)).rows[0].n;
      // Each row as JSON text (bytea → "\\x…" hex), the encrypted columns left out, made once: a subquery the
      // planner flattens would make it again for every needle (75k rows: 7 s instead of 45 s) …
      const rowHits = (
        await db.query<{ i: number }>(
          `WITH v AS MATERIALIZED (SELECT row_to_json(r)::text AS j FROM (SELECT ${columns.map(q).join(', ')} FROM ${from}) r)
           SELECT DISTINCT n.i::int AS i
             FROM v, unnest($1::text[]) WITH ORDINALITY AS n(needle, i)
            WHERE strpos(v.j, n.needle) > 0`,
          [texts],
        )
      ).rows;
      if (rowHits.length === 0) continue;
      // … and where something was found, per column, so the finding can say where and in which form (k: the
      // first whole form the value holds, none for a secret cut short).
      const perColumn = columns.map((c) => `SELECT ${db.escapeLiteral(c)} AS col, to_json(x.${q(c)})::text AS v FROM ${from} x`).join(' UNION ALL ');
      const hits = (
        await db.query<{ col: string; i: number; k: number | null; n: number }>(
          `WITH v AS MATERIALIZED (${perColumn})
           SELECT h.col, h.i, h.k, count(*)::int AS n
             FROM (SELECT v.col, n.i::int AS i,
                          (SELECT min(w.k)::int FROM jsonb_array_elements_text($2::jsonb -> (n.i::int - 1)) WITH ORDINALITY AS w(whole, k)
                            WHERE strpos(v.v, w.whole) > 0) AS k
                     FROM v, unnest($1::text[]) WITH ORDINALITY AS n(needle, i)
                    WHERE v.v IS NOT NULL AND strpos(v.v, n.needle) > 0) h
            GROUP BY h.col, h.i, h.k`,
          [texts, wholes],
        )
      ).rows;
      if (hits.length === 0) {
        findings.push(...rowHits.map((h) => ({ needle: needles[h.i - 1], form: needles[h.i - 1].forms[0].form, where: `table ${table} (across columns)`, count: 1 })));
      }
      for (const h of hits) {
        const needle = needles[h.i - 1];
        findings.push({ needle, form: formName(needle, h.k === null ? -1 : h.k - 1), where: `table ${schema === 'public' ? '' : `${schema}.`}${table}, column ${h.col}`, count: h.n });
      }
    }
    return { tables: tables.size, rows: rowCount, findings };
  } finally {
    await db.end();
  }
}

/** "SHOPIFY_TOKEN (plain) in table tool_calls, column input: 2 row(s)": never the value. */
export function describeFinding(f: Finding, unit: string): string {
  return `${f.needle.name} (${f.form}) in ${f.where}: ${f.count} ${unit}`;
}
