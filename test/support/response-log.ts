/**
 * Every response a test gets from a gateway, and each gateway's /metrics when
 * it is closed, go to the run log (run-log.ts), so the run-wide leak scan
 * searches error bodies, ledger and export answers and metrics of every spec,
 * not only the flow of test/reliability/leak-scan.spec.ts (issue 7).
 *
 * Only the response is written: status line, headers and body. The request
 * (its Authorization header above all: the test's own keys) never is.
 */
import { connect } from 'node:net';
import type { Response } from 'supertest';
import { MINTED_API_KEY, recordApiKey } from './api-keys.js';
import { MINTED_SECRETS_ENV, readMintedSecrets } from './minted-secrets.js';
import { NeedleIndex } from './needle-index.js';
import { hitsIn, type Needle } from './run-leak-scan.js';
import { appendToRunLog, CUT_OVERLAP } from './run-log.js';
import { runSecretNeedles } from './run-wide-scan.js';
import { ALL_TEST_SECRETS } from './secrets.js';

/**
 * How much of one body the run log keeps as it is. The largest answers (exports of thousands of rows, list pages
 * of large rows) would otherwise make the log huge. The rest is not dropped unread: it is searched here, with the
 * run's needles, and the surroundings of anything found are logged (overflowFindings), for the run-wide scan to
 * report.
 */
export const MAX_LOGGED_BODY = 64 * 1024;
/** Characters logged on each side of a secret found past the cap. */
const OVERFLOW_CONTEXT = 100;


/** What the log shows in place of the one secret an answer hands out by design. */
export const MINTED_KEY_PLACEHOLDER = '[minted API key: recorded by postApiKey, not logged]';

/** The path of a request URL (supertest's are absolute), or undefined when it does not parse. */
function pathOf(url: string): string | undefined {
  try {
    return new URL(url).pathname;
  } catch {
    return undefined;
  }
}

/** The request line as a label: method and path, never the query (a test may put anything there) or a header. */
function requestLabel(method: string, url: string): string {
  const path = pathOf(url) ?? url.split('?')[0]!;
  return `${method.toUpperCase()} ${path.replace(/[\t\r\n]/g, ' ').slice(0, 200)}`;
}

/** Is this POST /v1/api-keys, as the router matches it (case-insensitive, an optional trailing slash)? */
function isApiKeyCreation(method: string, url: string): boolean {
  return method.toUpperCase() === 'POST' && /^\/v1\/api-keys\/?$/i.test(pathOf(url) ?? '');
}

/** The body as text, whatever superagent made of it (text, a custom parser's string, a Buffer, parsed JSON). */
function bodyText(res: Response): string {
  if (typeof res.text === 'string') return res.text;
  const body: unknown = res.body;
  if (typeof body === 'string') return body;
  if (Buffer.isBuffer(body)) return body.toString('utf8');
  if (body === undefined || body === null) return '';
  if (typeof body === 'object' && Object.keys(body).length === 0) return '';
  return JSON.stringify(body);
}

/**
 * Whether `echoed` is the agent's note `from` handed back: as written, or with some test secrets in it (each wholly)
 * replaced by [REDACTED]. The gateway redacts the org's own credentials, by value, from every vendor answer
 * (src/redaction/credential-values.ts), so a note holding the org's token comes back with that token redacted and
 * the rest of the agent's text as it wrote it. Nothing that was not in `from` is ever accepted.
 */
const isOwnNote = (echoed: unknown, from: string): boolean => {
  if (echoed === from) return true;
  if (typeof echoed !== 'string' || !echoed.includes('[REDACTED]')) return false;
  const redacted = ALL_TEST_SECRETS.filter((s) => from.includes(s) && !echoed.includes(s)).reduce((t, s) => t.replaceAll(s, '[REDACTED]'), from);
  return echoed === redacted;
};
/** `value` with `note` put in place of `from` where it is the agent's own note (isOwnNote); else unchanged. */
const replacedNote = (value: unknown, from: string): unknown =>
  value && typeof value === 'object' && !Array.isArray(value) && isOwnNote((value as { note?: unknown }).note, from) ? { ...(value as object), note: OWN_NOTE } : value;
const OWN_NOTE = "[the agent's own note]";

/**
 * The answer to a Shopify add_note call with the agent's own note left out where the answer hands it back as the
 * agent wrote it: `result.note`, and the note of `toolResult.content` (the result as a JSON string). The vendor
 * returns the order's note and the gateway gives the agent the vendor's answer as is (the ledger keeps it
 * redacted); leak-scan.spec.ts writes test secrets into such a note on purpose, to check the ledger's redaction of
 * free text, and the agent reading its own note back is no leak. Only those two fields, only an exact match (but
 * for the org's credentials the gateway redacted: isOwnNote): the same text anywhere else in the answer is logged.
 * Undefined when the call or the answer is not that.
 */
function withoutOwnNote(method: string, url: string, sent: unknown, text: string): string | undefined {
  if (method.toUpperCase() !== 'POST' || !/^\/v1\/runs\/[^/]+\/tool-calls\/?$/.test(pathOf(url) ?? '')) return undefined;
  const call = sent as { name?: unknown; input?: { action?: unknown; note?: unknown } } | undefined;
  if (call?.name !== 'shopify_order' || call.input?.action !== 'add_note' || typeof call.input.note !== 'string') return undefined;
  const note = call.input.note;
  let body: { result?: unknown; toolResult?: { content?: unknown } };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return undefined;
  }
  if (!body || typeof body !== 'object' || !isOwnNote((body.result as { note?: unknown } | undefined)?.note, note)) return undefined;
  const out: Record<string, unknown> = { ...body, result: replacedNote(body.result, note) };
  const content = body.toolResult?.content;
  if (typeof content === 'string') {
    try {
      out.toolResult = { ...body.toolResult, content: JSON.stringify(replacedNote(JSON.parse(content), note)) };
    } catch {
      // not JSON: logged as it came
    }
  }
  return JSON.stringify(out);
}

/**
 * A 201 to POST /v1/api-keys answers the new key, once, by design (API.md): that one field is left out of the log
 * and recorded as a minted secret here (whoever made the call), so a copy of it anywhere else is a finding. Only a
 * key of the minted form that is no secret already: an answer handing out a fixed test secret or a key minted
 * before (another caller's) is logged as it came, for the scan to find.
 */
export function withoutNewKey(method: string, url: string, status: number, text: string): string | undefined {
  if (status !== 201 || !isApiKeyCreation(method, url)) return undefined;
  let parsed: { key?: unknown; role?: unknown };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    return undefined;
  }
  const key = parsed?.key;
  if (typeof key !== 'string' || !MINTED_API_KEY.test(key) || ALL_TEST_SECRETS.includes(key)) return undefined;
  const mintedFile = process.env[MINTED_SECRETS_ENV];
  if (mintedFile && Object.values(readMintedSecrets(mintedFile)).includes(key)) return undefined;
  // After the caller's own recording (postApiKey, createKey: their label says who minted it), which runs once the
  // request's promise settles; a key nobody records is recorded here.
  const role = typeof parsed.role === 'string' ? parsed.role : 'role not given';
  setImmediate(() => recordApiKey(key, role, 'response log'));
  return JSON.stringify({ ...parsed, key: MINTED_KEY_PLACEHOLDER });
}

/**
 * Past the cap: the run's secrets found in `rest`, each with OVERFLOW_CONTEXT characters around it, for the run
 * log. Fails closed: when the minted secrets cannot be read, the whole rest is logged.
 */
export function overflowFindings(rest: string, run: { needles: Needle[]; unreadable?: unknown } = runSecretNeedles()): string[] {
  const { needles, unreadable } = run;
  if (unreadable !== undefined) return [rest];
  return hitsIn(new NeedleIndex(needles), rest).map((n) => {
    const at = rest.indexOf(n.text);
    return rest.slice(Math.max(0, at - OVERFLOW_CONTEXT), at + n.text.length + OVERFLOW_CONTEXT);
  });
}

/** The body to log: as it came but for the two by-design answers above, capped. */
function loggedBody(method: string, url: string, status: number, raw: string, sent: unknown): string {
  return capped(withoutOwnNote(method, url, sent, raw) ?? withoutNewKey(method, url, status, raw) ?? raw);
}

/** `text` up to MAX_LOGGED_BODY, and past that only what the run's needles find in the rest (overflowFindings). */
export function capped(text: string, run?: { needles: Needle[]; unreadable?: unknown }): string {
  if (text.length <= MAX_LOGGED_BODY) return text;
  // From CUT_OVERLAP before the cut: a secret starting just before it has too little of itself on the logged side for
  // its needle (a secret's start), and its start is not in the rest.
  const found = overflowFindings(text.slice(MAX_LOGGED_BODY - CUT_OVERLAP), run);
  return [
    text.slice(0, MAX_LOGGED_BODY),
    `[… ${text.length - MAX_LOGGED_BODY} more characters searched, not logged; ${found.length} secret(s) found in them, with their surroundings:]`,
    ...found,
  ].join('\n');
}

/**
 * Writes one response (status line, headers, body) to the run log under `response <METHOD> <path>`. `sent` is
 * the request's body, read only to recognise the agent's own text handed back (withoutOwnNote), never logged.
 */
export function logResponse(method: string, url: string, res: Response, sent?: unknown): void {
  logRawResponse(method, url, res.status, res.headers as Record<string, string | string[]>, bodyText(res), sent);
}

/** Response headers as node:http (IncomingMessage.headers) or fetch (Headers) give them. */
export type RawHeaders = Headers | Record<string, string | string[] | number | undefined>;

/**
 * logResponse for a response a test read itself (fetch, node:http, a raw socket): the same log lines, under the
 * same rules (the minted key left out, the cap). `url` should be absolute, as supertest's are: the key rule
 * recognises POST /v1/api-keys by the URL's path.
 */
export function logRawResponse(method: string, url: string, status: number, headers: RawHeaders, body: string, sent?: unknown): void {
  const entries = headers instanceof Headers ? [...headers.entries()] : Object.entries(headers).filter(([, v]) => v !== undefined);
  const head = [`HTTP ${status}`, ...entries.map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)];
  appendToRunLog(`response ${requestLabel(method, url)}`, `${head.join('\n')}\n\n${loggedBody(method, url, status, body, sent)}`);
}

/** A request body sent as JSON text, parsed (withoutOwnNote reads what supertest keeps parsed); else undefined. */
function parsedJson(body: unknown): unknown {
  if (typeof body !== 'string') return undefined;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * fetch() with the response written to the run log (logRawResponse) before it is returned. A clone is read, so
 * the caller still reads the original; that waits for the whole body (not for a stream meant to stay open).
 */
export async function loggedFetch(input: string | URL | Request, init?: RequestInit): Promise<globalThis.Response> {
  const res = await fetch(input, init);
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  const url = input instanceof Request ? input.url : String(input);
  let body: string;
  try {
    body = await res.clone().text();
  } catch (e) {
    // the caller reading the original sees the same failure: log what did come
    body = `[body not readable: ${e instanceof Error ? e.message : String(e)}]`;
  }
  logRawResponse(method, url, res.status, res.headers, body, parsedJson(init?.body));
  return res;
}

/**
 * What a raw socket received from a gateway, written to the run log: the first final answer (a 1xx before it is
 * skipped) as logRawResponse writes it, named by the request line of `sent` (the request itself is never
 * logged); bytes past that answer (pipelined answers, anything unparsable) logged as they came under the same
 * name, capped like a body. `sent` may be anything a spec writes, malformed on purpose: a missing request line
 * names it RAW.
 */
export function logSocketAnswer(sent: string, received: string | Buffer): void {
  const bytes = typeof received === 'string' ? Buffer.from(received, 'utf8') : received;
  if (bytes.length === 0) return;
  const line = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/\d\.\d\r?\n/.exec(sent);
  const method = line?.[1] ?? 'RAW';
  let url = '(no request line)';
  if (line) {
    try {
      url = new URL(line[2]!, 'http://gateway').href;
    } catch {
      url = line[2]!;
    }
  }
  let at = 0;
  for (;;) {
    const end = bytes.indexOf('\r\n\r\n', at);
    const status = /^HTTP\/\d\.\d (\d{3})/.exec(bytes.subarray(at, at + 16).toString('latin1'))?.[1];
    if (end < 0 || !status) break;
    const [, ...lines] = bytes.subarray(at, end).toString('utf8').split('\r\n');
    at = end + 4;
    if (status.startsWith('1')) continue;
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const length = Number(headers['content-length']);
    const bodyEnd = Number.isSafeInteger(length) && length >= 0 ? Math.min(at + length, bytes.length) : bytes.length;
    logRawResponse(method, url, Number(status), headers, bytes.subarray(at, bodyEnd).toString('utf8'));
    at = bodyEnd;
    break;
  }
  if (at < bytes.length) appendToRunLog(`response ${requestLabel(method, url)}`, `[raw bytes received]\n\n${capped(bytes.subarray(at).toString('utf8'))}`);
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'del', 'head', 'options'] as const;

interface RequestLike {
  method: string;
  url: string;
  /** superagent's copy of what .send() was given */
  _data?: unknown;
  on(event: 'response', listener: (res: Response) => void): unknown;
}

/**
 * `agent` (supertest's request(…)) with every response it gets written to the run log (logResponse). The
 * requests are supertest's own: a spec chains .set/.send/.query/.buffer/.parse on them as before.
 */
export function recordingResponses<T extends object>(agent: T): T {
  const a = agent as unknown as Record<string, unknown>;
  for (const m of METHODS) {
    const original = a[m];
    if (typeof original !== 'function') continue;
    a[m] = (...args: unknown[]): unknown => {
      const req = (original as (...x: unknown[]) => RequestLike).apply(agent, args);
      req.on('response', (res) => logResponse(req.method, req.url, res, req._data));
      return req;
    };
  }
  return agent;
}

/**
 * Appends the /metrics text of the gateway at `baseUrl` to the run log under `metrics` (called before it is
 * closed), whatever its status. A gateway that no longer answers (killed, its server closed, hung) is skipped
 * after `timeoutMs`: there is nothing to read.
 */
export async function logMetrics(baseUrl: string, timeoutMs = 5_000): Promise<void> {
  try {
    const res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    appendToRunLog('metrics', await res.text());
  } catch {
    // not serving any more
  }
}

/**
 * One raw HTTP/1.1 exchange, for what supertest would not send as it is (a malformed request, an Expect, a header
 * past the limit): what came back once the connection closes, or after `holdMs`; the answer goes to the run log
 * (logSocketAnswer), which the run-wide leak scan reads.
 */
export function rawExchange(port: number, text: string, holdMs = 2_000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(text));
    let out = '';
    s.setEncoding('utf8').on('data', (c: string) => (out += c));
    s.on('close', () => {
      logSocketAnswer(text, out);
      resolve(out);
    });
    s.on('error', () => resolve(out));
    setTimeout(() => s.destroy(), holdMs);
  });
}
