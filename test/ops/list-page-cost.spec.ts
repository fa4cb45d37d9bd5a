import http from 'node:http';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyRateLimiter, RESULT_BYTES_PER_TOKEN } from '../../src/auth/key-rate-limiter.js';
import { Clock } from '../../src/common/clock.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

/**
 * README (RATE_LIMIT_RPS): a ledger list page (up to 16 MiB, LIST_PAGE_BYTES) and an export cost the key a token per
 * 64 KiB beyond the first, as a full result read does: at a token a request, one ops key within its burst had the
 * gateway read, parse and send hundreds of MB at once (30 concurrent pages of 12 MiB: 356 MB) while every other
 * org's requests, health included, waited behind it. The charge is debt the key's next requests wait for; a page or
 * export that finds the key in debt already is 429 with a Retry-After a client can follow literally.
 *
 * The key's bucket refills on the gateway's Clock (KeyRateLimiter), moved here with advance() instead of waiting;
 * real time only ever adds tokens, so the assertions hold however slow the host.
 */

/** GET on the app's port; the body is counted, never parsed. */
function get(port: number, path: string, key: string): Promise<{ status: number; bytes: number; retryAfter: number | null }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: bearer(key), agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        const ra = res.headers['retry-after'];
        resolve({ status: res.statusCode ?? 0, bytes, retryAfter: ra === undefined ? null : Number(ra) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

const RPS = 2; // a burst of 4
const ROWS = 200;
const PAGE = 20;

describe('ledger list pages and exports are charged by size', () => {
  let t: TestApp;
  let port: number;
  let orgId: string;
  let ops: { key: string; id: string };
  let clock: Clock;
  let limiter: KeyRateLimiter;
  /** Redacted input and output bytes of the newest `n` rows: what a page of them is charged for. */
  let pageBytes: (n: number) => Promise<number>;

  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_RPS: String(RPS) });
    port = ((t.app.getHttpServer() as Server).address() as { port: number }).port;
    clock = t.app.get(Clock);
    limiter = t.app.get(KeyRateLimiter);
    orgId = await createOrg(t, 'Big ledger');
    ops = await createKey(t, orgId, 'ops');
    const runId = await insertRun(t.ds, orgId);
    // Results of ~60 KiB each: within the ledger's output cap (LEDGER_OUTPUT_MAX_BYTES, 64 KiB), as any org whose
    // vendor answers are large has from ordinary traffic. 200 of them (12 MiB): an export of two batches.
    const blob = 'x'.repeat(60 * 1024);
    for (let b = 0; b < ROWS / 50; b++) {
      await insertCalls(t.ds, Array.from({ length: 50 }, (_, i) => ({ orgId, runId, createdAt: microsAfterEpoch2026((b * 50 + i) * 1000), outputRedacted: { i, blob } })));
    }
    pageBytes = async (n) =>
      Number(
        (
          (await t.ds.query(
            `SELECT sum(octet_length(input_redacted::text) + coalesce(octet_length(output_redacted::text), 0)) AS n
               FROM (SELECT * FROM tool_calls WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2) page`,
            [orgId, n],
          )) as { n: string }[]
        )[0].n,
      );
  }, 120_000);
  afterAll(async () => {
    if (t) await t.ds.query('DELETE FROM tool_calls WHERE org_id = $1', [orgId]);
    await t?.close();
  });

  /** Time enough for any debt to be paid back and the key's bucket to be full (a burst of 4) again. */
  const refill = () => clock.advance(600_000);

  it('a large page is served and charged a token per 64 KiB of its rows beyond the first: the next request is 429, and a client waiting its Retry-After is then served', async () => {
    const cost = Math.floor((await pageBytes(PAGE)) / RESULT_BYTES_PER_TOKEN);
    expect(cost).toBeGreaterThanOrEqual(15); // far more than the burst of 4
    refill();
    const page = await t.http.get(`/v1/tool-calls?limit=${PAGE}`).set(bearer(ops.key));
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(PAGE);
    // The key owes what the page cost beyond the bucket: 4 - 1 - cost tokens, paid back at RPS a second.
    const owed = cost - 3;
    expect(limiter.debtWait(ops.id)).toBeGreaterThanOrEqual(Math.floor(owed / RPS) - 1);
    expect(limiter.debtWait(ops.id)).toBeLessThanOrEqual(Math.ceil((owed + 1) / RPS));
    // Even a one-row page waits for it.
    const next = await get(port, '/v1/tool-calls?limit=1', ops.key);
    expect(next.status).toBe(429);
    expect(next.retryAfter).toBeGreaterThanOrEqual(Math.floor(owed / RPS) - 1);
    expect(next.retryAfter).toBeLessThanOrEqual(Math.ceil((owed + 1) / RPS));
    // Followed literally, the Retry-After admits the retry: the large page again, charged again.
    clock.advance(next.retryAfter! * 1000);
    const again = await get(port, `/v1/tool-calls?limit=${PAGE}`, ops.key);
    expect(again.status).toBe(200);
    expect(limiter.debtWait(ops.id)).toBeGreaterThanOrEqual(Math.floor(cost / RPS) - 1);
  });

  it('pages under 64 KiB cost one token each, as before: a full bucket serves four and leaves no debt', async () => {
    expect(await pageBytes(1)).toBeLessThan(RESULT_BYTES_PER_TOKEN);
    refill();
    for (let i = 0; i < 2 * RPS; i++) expect((await get(port, '/v1/tool-calls?limit=1', ops.key)).status).toBe(200);
    expect(limiter.debtWait(ops.id)).toBe(0);
  });

  it('concurrent large pages of one key: one is served, the others are 429 with a Retry-After, not each sent for a token apiece', async () => {
    refill();
    const answers = await Promise.all(Array.from({ length: 2 * RPS }, () => get(port, `/v1/tool-calls?limit=${PAGE}`, ops.key)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 429, 429, 429]);
    for (const a of answers.filter((x) => x.status === 429)) expect(a.retryAfter).toBeGreaterThanOrEqual(1);
    const served = answers.find((a) => a.status === 200)!;
    expect(served.bytes).toBeLessThan(2 * PAGE * 64 * 1024);
  });

  it('a page of ledger events is charged by its metadata as a tool-call page is: of concurrent large pages one is served, the others are 429', async () => {
    // Events of some 60 KiB each, as an org admin's permission changes write them (the whole diff of a 64 KiB PUT).
    await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, actor, metadata)
       SELECT gen_random_uuid(), $1, 'tool_permissions.changed', '{"role": "admin"}'::jsonb, jsonb_build_object('i', g, 'blob', repeat('x', 60 * 1024))
         FROM generate_series(1, $2::int) g`,
      [orgId, PAGE],
    );
    refill();
    const answers = await Promise.all(Array.from({ length: 2 * RPS }, () => get(port, `/v1/ledger/events?type=tool_permissions.changed&limit=${PAGE}`, ops.key)));
    // Before: all four served at a token each (a growth reviewer's ten pages of 200 such events: 229 MB at once).
    expect(answers.map((a) => a.status).sort()).toEqual([200, 429, 429, 429]);
    expect(answers.find((a) => a.status === 200)!.bytes).toBeGreaterThan(PAGE * 60 * 1024);
  });

  it('a page of ledger events ends early, with a cursor, at 16 MiB of metadata; following it reads every event once', async () => {
    const n = 200;
    await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, actor, metadata)
       SELECT gen_random_uuid(), $1, 'policy.changed', '{"role": "admin"}'::jsonb, jsonb_build_object('i', g, 'blob', repeat('y', 100 * 1024))
         FROM generate_series(1, $2::int) g`,
      [orgId, n],
    );
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      refill();
      const page: { status: number; body: { items: { metadata: { i: number } }[]; nextCursor: string | null } } = await t.http
        .get(`/v1/ledger/events?type=policy.changed&limit=200${cursor ? `&cursor=${cursor}` : ''}`)
        .set(bearer(ops.key));
      expect(page.status).toBe(200);
      if (pages++ === 0) expect(page.body.items.length).toBeLessThan(170); // 16 MiB of 100 KiB events, not all 200 (20 MB)
      seen.push(...page.body.items.map((e) => e.metadata.i));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(pages).toBe(2);
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  });

  it('an export is charged by the bytes it streams, batch after batch: the key owes them, its next request waits, and its Retry-After followed literally is served', async () => {
    refill();
    const file = await get(port, '/v1/tool-calls/export?format=ndjson', ops.key);
    expect(file.status).toBe(200);
    expect(file.bytes).toBeGreaterThan(ROWS * 60 * 1024); // every row, past the first batch's 8 MiB
    const cost = Math.floor(file.bytes / RESULT_BYTES_PER_TOKEN);
    const owed = cost - 3;
    // Charged the whole file, not only the first batch (~128 tokens) it had read before answering.
    expect(limiter.debtWait(ops.id)).toBeGreaterThanOrEqual(Math.floor(owed / RPS) - 1);
    expect(limiter.debtWait(ops.id)).toBeLessThanOrEqual(Math.ceil((owed + 1) / RPS));
    const next = await get(port, '/v1/tool-calls?limit=1', ops.key);
    expect(next.status).toBe(429);
    expect(next.retryAfter).toBeGreaterThanOrEqual(Math.floor(owed / RPS) - 1);
    clock.advance(next.retryAfter! * 1000);
    expect((await get(port, '/v1/tool-calls?limit=1', ops.key)).status).toBe(200);
  }, 60_000);

  it('concurrent exports of one key: one streams, the other is 429 before anything is sent', async () => {
    refill();
    const answers = await Promise.all([get(port, '/v1/tool-calls/export?format=csv', ops.key), get(port, '/v1/tool-calls/export?format=csv', ops.key)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 429]);
    expect(answers.find((a) => a.status === 429)!.retryAfter).toBeGreaterThanOrEqual(1);
  }, 60_000);
});

describe('RATE_LIMIT_RPS=0: list pages and exports are not charged', () => {
  let t: TestApp;
  let orgId: string;
  let ops: string;
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_RPS: '0' });
    orgId = await createOrg(t, 'Big ledger, no limit');
    ops = (await createKey(t, orgId, 'ops')).key;
    const runId = await insertRun(t.ds, orgId);
    const blob = 'x'.repeat(60 * 1024);
    await insertCalls(t.ds, Array.from({ length: 40 }, (_, i) => ({ orgId, runId, createdAt: microsAfterEpoch2026(i * 1000), outputRedacted: { i, blob } })));
  }, 120_000);
  afterAll(async () => {
    if (t) await t.ds.query('DELETE FROM tool_calls WHERE org_id = $1', [orgId]);
    await t?.close();
  });

  it('large pages and exports one after another are all served', async () => {
    for (let i = 0; i < 3; i++) {
      const page = await t.http.get('/v1/tool-calls?limit=40').set(bearer(ops));
      expect([page.status, page.body.items?.length]).toEqual([200, 40]);
      expect((await t.http.get('/v1/tool-calls/export?format=ndjson').set(bearer(ops)).buffer(true)).status).toBe(200);
    }
  });
});
