/**
 * The run-wide leak scan (issue 7): once every test file has run, the test
 * secrets appear nowhere: not in the run log (every in-process log line and
 * every child's stdout/stderr, run-log.ts) and not in any row of any table of
 * the test database, the encrypted columns included (their AES-GCM ciphertext
 * holds no secret's bytes; plaintext written there is found). Findings name the
 * secret's variable (or, for a secret minted during the run, what minted it,
 * minted-secrets.ts) and the form it was found in, never its value.
 *
 * Runs in vitest's main process (run-wide-scan.ts): no vitest imports.
 */
import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { NeedleIndex } from './needle-index.js';
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
  /**
   * A secret's end, or its start upper- or lower-cased: what a leak keeping only the tail ("****" over the start) or
   * changing the case leaves. Not reported where a needle of the same secret that is neither is found too.
   */
  secondary?: true;
}

/** The needles `index` finds in `text`, without the secondary ones of a secret found by a primary one there. */
export function hitsIn<N extends Needle>(index: NeedleIndex<N>, text: string): N[] {
  const hits = index.find(text);
  if (!hits.some((n) => n.secondary)) return hits;
  const primary = new Set(hits.filter((n) => !n.secondary).map((n) => n.name));
  return hits.filter((n) => !n.secondary || !primary.has(n.name));
}

/**
 * A secret of 20 characters or more is searched for by its first min(24, length - 4) characters, in each form:
 * that finds it cut short too (a log field or an error message sliced to a length), and finds the whole as well,
 * so the start replaces the whole form rather than adding a string to look for. 16 characters and more of a test
 * secret do not occur by chance, and no two secrets start alike.
 */
export const SECRET_WINDOW = { minLength: 20, of: (length: number): number => Math.min(24, length - 4) };

const SEQUENCES = ['0123456789abcdefghijklmnopqrstuvwxyz', '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'];
/**
 * Whether `text` is typed rather than drawn at random: it holds six characters of a sequence in a row (012345, abcdef)
 * or one character four times in a row. A random 24-character token does either with a chance of about one in a
 * hundred million.
 */
function madeUp(text: string): boolean {
  if (/(.)\1{3}/.test(text)) return true;
  for (let i = 0; i + 6 <= text.length; i++) {
    const run = text.slice(i, i + 6);
    if (SEQUENCES.some((seq) => seq.includes(run))) return true;
  }
  return false;
}

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
 *
 * `fixedStart` is how many leading characters of a value every value of its kind shares (a minted token's format
 * prefix, a JWT's header): the window then holds that many more, so that its start is as distinctive as a fixed
 * secret's.
 */
export function secretForms(secrets: Readonly<Record<string, string>> = NAMED_TEST_SECRETS, fixedStart: (value: string) => number = () => 0): Needle[] {
  const out: Needle[] = [];
  const byText = new Map<string, Needle>();
  const add = (name: string, form: string, text: string, whole: string, window?: number, secondary = false): void => {
    // bytea columns (IVs, auth tags, ciphertext) read as the hex of random bytes: a needle of hex digits only needs
    // 64 bits (16 digits) not to be found there by chance.
    if (text.length < (/^[0-9a-f]+$/.test(text) ? 16 : 8)) return;
    const key = `${name}\0${text}`;
    const n = byText.get(key);
    if (!n) {
      const needle: Needle = { name, text, forms: [{ form, whole }], window, ...(secondary ? { secondary: true as const } : {}) };
      byText.set(key, needle);
      out.push(needle);
    } else if (!n.forms.some((f) => f.whole === whole)) n.forms.push({ form, whole });
  };
  for (const [name, value] of Object.entries(secrets)) {
    const fixed = fixedStart(value);
    const window = value.length - fixed >= SECRET_WINDOW.minLength ? fixed + SECRET_WINDOW.of(value.length - fixed) : undefined;
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
    if (window === undefined) continue;
    // A long secret's end too, in each form (a mask over its start leaves it), and its start upper- and lower-cased.
    const tailLength = SECRET_WINDOW.of(value.length - fixed);
    const tail = value.slice(-tailLength);
    // A stand-in a spec made up (shpat_0123456789abcdef…) has no distinctive end: other test data holds it too.
    for (const [form, text] of madeUp(tail) ? [] : textualForms(tail, true)) {
      add(name, `${form}, its last ${tailLength} characters`, text, text, undefined, true);
      add(name, `${form}, its last ${tailLength} characters, as bytes (hex)`, hex(text), hex(text), undefined, true);
    }
    const start = value.slice(0, window);
    add(name, 'plain, upper-cased', start.toUpperCase(), value.toUpperCase(), window, true);
    add(name, 'plain, lower-cased', start.toLowerCase(), value.toLowerCase(), window, true);
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
  const index = new NeedleIndex(needles);
  const rl = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of rl) {
    lines++;
    for (const n of hitsIn(index, line)) {
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
 * each column value as JSON text (bytea as \x hex, so the hex needles find
 * secrets in decoded bytes), the encrypted ciphertext columns too: AES-GCM
 * output holds no needle by chance (add), a secret stored there as plaintext
 * is found. A finding names the table, the column and how many rows.
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
      tables.get(key)!.columns.push(c.column);
    }
    const index = new NeedleIndex(needles);
    const found = new Map<string, Finding>();
    let rowCount = 0;
    const q = (s: string): string => `"${s.replace(/"/g, '""')}"`;
    await db.query('BEGIN READ ONLY');
    for (const { schema, table, columns } of tables.values()) {
      if (columns.length === 0) continue;
      // The values come here through a cursor and the needles are searched here, in one pass per value: the
      // minted secrets make thousands of needles, and a strpos per needle per row in the database took minutes.
      await db.query(`DECLARE leak_scan NO SCROLL CURSOR FOR SELECT ${columns.map((c) => `to_json(x.${q(c)})::text`).join(', ')} FROM ${q(schema)}.${q(table)} x`);
      for (;;) {
        const { rows } = await db.query<(string | null)[]>({ text: 'FETCH 2000 FROM leak_scan', rowMode: 'array' });
        if (rows.length === 0) break;
        rowCount += rows.length;
        for (const row of rows) {
          row.forEach((value, i) => {
            if (value === null) return;
            for (const n of hitsIn(index, value)) {
              const form = formName(n, n.forms.findIndex((w) => value.includes(w.whole)));
              const where = `table ${schema === 'public' ? '' : `${schema}.`}${table}, column ${columns[i]!}`;
              const key = `${where}\0${n.name}\0${n.text}\0${form}`;
              const f = found.get(key);
              if (f) f.count++;
              else found.set(key, { needle: n, form, where, count: 1 });
            }
          });
        }
      }
      await db.query('CLOSE leak_scan');
    }
    await db.query('COMMIT');
    return { tables: tables.size, rows: rowCount, findings: [...found.values()] };
  } finally {
    await db.end();
  }
}

/** "SHOPIFY_TOKEN (plain) in table tool_calls, column input: 2 row(s)": never the value. */
export function describeFinding(f: Finding, unit: string): string {
  return `${f.needle.name} (${f.form}) in ${f.where}: ${f.count} ${unit}`;
}
