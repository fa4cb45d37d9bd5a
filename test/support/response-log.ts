/**
 * Every response a test gets from a gateway, and each gateway's /metrics when
 * it is closed, go to the run log (run-log.ts), so the run-wide leak scan
 * searches error bodies, ledger and export answers and metrics of every spec,
 * not only the flow of test/reliability/leak-scan.spec.ts (issue 7).
 *
 * Only the response is written: status line, headers and body. The request
 * (its Authorization header above all: the test's own keys) never is.
 */
import type { Response } from 'supertest';
import { appendToRunLog } from './run-log.js';

/**
 * How much of one body the run log keeps. The largest answers (exports of
 * thousands of rows) would otherwise make the log huge; a secret is short,
 * and one cut at the cap is still found by its start (SECRET_WINDOW).
 */
export const MAX_LOGGED_BODY = 64 * 1024;

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

/** A string as it appears inside a JSON string (quotes and backslashes escaped), and inside a JSON string again. */
const jsonInner = (s: string): string => JSON.stringify(s).slice(1, -1);

/**
 * The note of a Shopify add_note call, when the answer hands it back as the agent wrote it: the vendor returns the
 * order's note, and the gateway gives the agent the vendor's answer as is (the ledger keeps it redacted).
 * leak-scan.spec.ts writes test secrets into such a note on purpose, to check the ledger's redaction of free
 * text; the agent reading its own note back is no leak. Only that call, that field, that exact text.
 */
function agentsOwnNote(method: string, url: string, sent: unknown, text: string): string | undefined {
  if (method.toUpperCase() !== 'POST' || !/^\/v1\/runs\/[^/]+\/tool-calls\/?$/.test(pathOf(url) ?? '')) return undefined;
  const call = sent as { name?: unknown; input?: { action?: unknown; note?: unknown } } | undefined;
  if (call?.name !== 'shopify_order' || call.input?.action !== 'add_note' || typeof call.input.note !== 'string') return undefined;
  try {
    return (JSON.parse(text) as { result?: { note?: unknown } }).result?.note === call.input.note ? call.input.note : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The body to log. A 201 to POST /v1/api-keys answers the new key, once, by design (API.md): that one field is
 * replaced (postApiKey records the key as a minted secret, so a copy anywhere else is still a finding). So is
 * the agent's own add_note text handed back to it (agentsOwnNote). Nothing else of any answer is left out.
 */
function loggedBody(method: string, url: string, res: Response, sent: unknown): string {
  let text = bodyText(res);
  const note = agentsOwnNote(method, url, sent, text);
  if (note !== undefined && note.length > 0) {
    // In the answer's result, and in its toolResult.content (the result as a JSON string).
    text = text.replaceAll(jsonInner(note), '[the agent\'s own note]').replaceAll(jsonInner(jsonInner(note)), '[the agent\'s own note]');
  }
  if (res.status === 201 && isApiKeyCreation(method, url)) {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed && typeof parsed === 'object' && typeof (parsed as { key?: unknown }).key === 'string') {
        return JSON.stringify({ ...(parsed as object), key: MINTED_KEY_PLACEHOLDER });
      }
    } catch {
      // not JSON: logged as it came
    }
  }
  return text.length > MAX_LOGGED_BODY ? `${text.slice(0, MAX_LOGGED_BODY)}\n[… ${text.length - MAX_LOGGED_BODY} more characters not logged]` : text;
}

/**
 * Writes one response (status line, headers, body) to the run log under `response <METHOD> <path>`. `sent` is
 * the request's body, read only to recognise the agent's own text handed back (agentsOwnNote), never logged.
 */
export function logResponse(method: string, url: string, res: Response, sent?: unknown): void {
  const head = [`HTTP ${res.status}`, ...Object.entries(res.headers as Record<string, string | string[]>).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`)];
  appendToRunLog(`response ${requestLabel(method, url)}`, `${head.join('\n')}\n\n${loggedBody(method, url, res, sent)}`);
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
