import { readFileSync } from 'node:fs';
import net from 'node:net';
import pg from 'pg';
import type TestAgent from 'supertest/lib/agent.js';
import { logSocketAnswer } from '../support/response-log.js';
import { ALL_TEST_SECRETS, TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { bearer } from '../support/test-app.js';

/** A small pool on the test database, for reading the ledger behind the gateway's back. */
export function openDb(url = process.env.DATABASE_URL): pg.Pool {
  if (!url) throw new Error('DATABASE_URL is not set (the global setup provides it)');
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  return pool;
}

export async function rows<T = Record<string, unknown>>(db: pg.Pool, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db.query(sql, params)).rows as T[];
}

export { waitFor } from '../support/wait.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The status of a GET of `url` (fetch, no keep-alive pool of supertest's), or what failed instead ("fetch failed: ECONNREFUSED"). */
export async function statusOf(url: string): Promise<number | string> {
  try {
    const r = await fetch(url);
    await r.arrayBuffer();
    return r.status;
  } catch (e) {
    return `fetch failed: ${String((e as { cause?: { code?: string } }).cause?.code ?? e)}`;
  }
}

/** POST a tool_use to a run as its agent; never throws on an HTTP status. */
export function postToolUse(http: TestAgent, runId: string, agentKey: string, body: unknown, headers: Record<string, string> = {}) {
  return http
    .post(`/v1/runs/${runId}/tool-calls`)
    .set({ ...bearer(agentKey), ...headers })
    .send(body as object);
}

/**
 * Every secret text the suite knows, in the forms it could leak in: the
 * configured strings, the master keys' raw bytes as hex, and any API keys a
 * test created (they are secrets as much as vendor tokens are).
 */
export function secretNeedles(extra: string[] = []): string[] {
  const hex = [TEST_MASTER_KEY, TEST_MASTER_KEY_2].map((k) => Buffer.from(k, 'base64').toString('hex'));
  return [...ALL_TEST_SECRETS, ...hex, ...extra].filter((s) => s.length >= 8);
}

/** The needles found in `text` (empty when it is clean). */
export function leakedIn(text: string, needles = secretNeedles()): string[] {
  return needles.filter((s) => text.includes(s));
}

/** A process's resident memory, in MB (/proc/<pid>/status). */
export function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

/** A raw TCP client: what it received, and when (performance.now()) the gateway closed it. */
export interface RawClient {
  sock: net.Socket;
  received(): string;
  closedAt(): number | undefined;
}

/** `noDelay`: every write in its own packet (Nagle off), for a body trickled a byte at a time. */
export async function rawClient(port: number, opts: { noDelay?: boolean } = {}): Promise<RawClient> {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  if (opts.noDelay) sock.setNoDelay(true);
  const chunks: string[] = [];
  let closedAt: number | undefined;
  // The first bytes the test writes name the answer in the run log (logSocketAnswer); they are never logged.
  let sent = '';
  const write = sock.write.bind(sock) as (chunk: string) => boolean;
  sock.write = ((chunk: string) => ((sent ||= chunk), write(chunk))) as typeof sock.write;
  sock.setEncoding('utf8').on('data', (c: string) => chunks.push(c));
  sock.on('error', () => undefined); // a reset is one of the answers under test
  sock.on('close', () => {
    closedAt = performance.now();
    logSocketAnswer(sent, chunks.join('')); // the run-wide leak scan reads it
  });
  return { sock, received: () => chunks.join(''), closedAt: () => closedAt };
}
