import pg from 'pg';
import type TestAgent from 'supertest/lib/agent.js';
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
