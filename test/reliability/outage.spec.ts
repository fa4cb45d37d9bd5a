import pg from 'pg';
import type { Response } from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, startPgServer, setupOrgVia, type GatewayProcess, type PgServerProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { leakedIn, postToolUse, secretNeedles, sleep, waitFor } from './support.js';

/**
 * PostgreSQL goes away under a serving gateway and comes back. While it is
 * gone, calls fail fast with 503 DATABASE_UNAVAILABLE and no vendor call is
 * made without its ledger row; afterwards the same process serves again.
 */
/**
 * The least time a tool call answered 503 by its intent write has taken: the write is sent again for
 * INTENT_WRITE_RETRY_MS (3 s, tool-calls.service.ts) and retryWhileUnavailable stops only when its next wait
 * (at most capMs, 500 ms) would overrun that budget.
 */
const INTENT_RETRY_FLOOR_MS = 3_000 - 500;

describe('database outage', () => {
  let emu: VendorEmulator;
  let pgServer: PgServerProcess;
  let gw: GatewayProcess;
  let org: OrgSetup;
  const vendorCalls = () => emu.count({ vendor: 'shopify' });

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    pgServer = await startPgServer(`.tmp/pg-outage-${process.pid}`);
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), DATABASE_URL: pgServer.url, VENDOR_TIMEOUT_MS: '10000' });
    org = await setupOrgVia(gw, { tools: ['order_lookup.lookup', 'shopify_order.add_note'] });
  }, 90_000);
  // A test that fails while the database is away gives it back, so that the next one starts from a serving gateway.
  let databaseDown = false;
  const stopDatabase = async () => {
    databaseDown = true;
    await pgServer.stopServer();
  };
  const startDatabase = async () => {
    await pgServer.startServer();
    databaseDown = false;
  };
  afterEach(async () => {
    if (!databaseDown) return;
    await startDatabase();
    await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
  }, 30_000);
  afterAll(async () => {
    try {
      await gw?.stop();
      await pgServer?.close(); // leak-scans the database first: a finding fails this file
    } finally {
      await emu?.stop();
    }
  });

  /** Rows of the ledger that a vendor call may have: tool calls with a tool_call.started event. Read behind the gateway's back. */
  const startedCalls = async (): Promise<number> => {
    const db = new pg.Client({ connectionString: pgServer.url });
    await db.connect();
    try {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM tool_calls c
          WHERE EXISTS (SELECT 1 FROM runtime_ledger_events e WHERE e.tool_call_id = c.id AND e.type = 'tool_call.started')`,
      );
      return rows[0].n;
    } finally {
      await db.end();
    }
  };
  /** The answer and how long it took, from sending to the end of the answer. */
  const timed = async (req: PromiseLike<Response>): Promise<{ res: Response; ms: number }> => {
    const sent = performance.now();
    const res = await req;
    return { res, ms: performance.now() - sent };
  };

  const expectUnavailable = (res: Response, what: string) => {
    expect(res.status, `${what}: ${res.status} ${res.text}`).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.text)).toMatchObject({ status: 503, code: 'DATABASE_UNAVAILABLE' });
  };

  it('answers 503 DATABASE_UNAVAILABLE without calling the vendor, and recovers by itself when the database is back', async () => {
    // The warm-up loads the org's flags, policies and credentials; the gateway caches them for 1 s
    // (feature-flags/policies/credentials services, CACHE_TTL_MS). Calls made within that second find
    // them cached, so they get as far as the intent write (the first statement that needs PostgreSQL),
    // which is what "no vendor call without its ledger row" is about.
    // Well within the cache lifetime: otherwise the calls below would fail earlier, at a cache reload, and
    // the test would pass without ever reaching the intent write. A loaded machine can take longer than that to
    // stop PostgreSQL: then the attempt does not count, the database comes back and the warm-up is made again.
    const vendorAtStart = vendorCalls();
    const startedAtStart = await startedCalls();
    const outputAtStart = gw.output().length;
    let warm: Response | undefined;
    let warmCalls = 0;
    let before: number;
    let t0: number;
    for (let attempt = 1; ; attempt++) {
      const warmSent = performance.now();
      warm = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect(warm.body).toMatchObject({ status: 'succeeded' });
      warmCalls++;
      expect((await gw.http.get('/readyz')).status).toBe(200);
      await stopDatabase();
      before = vendorCalls();
      t0 = performance.now();
      if (t0 - warmSent < 700) break;
      expect(attempt, 'the outage calls start within 700 ms of the warm-up (1 s cache), in one of 3 attempts').toBeLessThan(3);
      await startDatabase();
      await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
    }
    const during = await Promise.all([
      ...Array.from({ length: 6 }, (_, i) => timed(postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: String(1001 + (i % 2)) })))),
      timed(postToolUse(gw.http, org.runId, org.agentKey, toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'during the outage' }))),
      // a replay of a call that succeeded before the outage cannot be answered either
      timed(postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, warm.body.toolResult.tool_use_id as string))),
    ]);
    const elapsed = performance.now() - t0;
    during.forEach(({ res }, i) => expectUnavailable(res, `call ${i}`));
    // Each 503 came from the intent write, not from an earlier lookup: only the intent write is sent again while
    // the database is unavailable (tool-calls.service.ts, INTENT_WRITE_RETRY_MS = 3 s, at most 500 ms between
    // attempts), and it gives up only once another wait would overrun that budget, so not before 2.5 s. A flag,
    // policy, run or key lookup that missed its cache fails at the first refused connection, in milliseconds.
    // A loaded machine only makes the calls slower: this bound cannot fail because of it.
    during.forEach(({ ms }, i) => expect(ms, `call ${i} answered 503 after ${Math.round(ms)} ms, before the intent write's retries were spent`).toBeGreaterThanOrEqual(INTENT_RETRY_FLOOR_MS));
    expect(elapsed).toBeLessThan(10_000); // bounded by the pool's 3 s connect timeout, never a hang
    expect(vendorCalls()).toBe(before);

    const ready = await gw.http.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ status: 503, code: 'DATABASE_UNAVAILABLE', database: 'down' });
    expect(ready.headers['content-type']).toMatch(/application\/problem\+json/);
    expect((await gw.http.get('/healthz')).status).toBe(200);
    expectUnavailable(await gw.http.get('/v1/tool-calls').set(bearer(org.adminKey)), 'ledger listing');
    expectUnavailable(await gw.http.get(`/v1/tool-calls/${warm.body.toolCallId as string}/result`).set(bearer(org.agentKey)), 'result');

    // Background work (ledger sealer, sweeps) fails for a while; the process must ride it out.
    await sleep(5_500);
    expect(vendorCalls()).toBe(before);

    await startDatabase();
    // Same data, same port: the URL the gateway was started with still works.
    const probe = new pg.Client({ connectionString: pgServer.url });
    await probe.connect();
    expect((await probe.query('SELECT count(*)::int AS n FROM tool_calls')).rows[0].n).toBeGreaterThan(0);
    await probe.end();

    await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
    const after = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '1002' }));
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ status: 'succeeded', replayed: false });
    expect(vendorCalls()).toBe(before + 1);
    const replay = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, warm.body.toolResult.tool_use_id as string));
    expect(replay.body).toMatchObject({ toolCallId: warm.body.toolCallId, replayed: true });
    expect(vendorCalls()).toBe(before + 1);
    // No calls of the outage reached the ledger half-written.
    const calls = await gw.http.get(`/v1/tool-calls?runId=${org.runId}&limit=200`).set(bearer(org.adminKey));
    expect(calls.status).toBe(200);
    expect((calls.body.items as { status: string }[]).map((c) => c.status)).toEqual(Array(warmCalls + 1).fill('succeeded'));
    // The invariant itself: every vendor call of this test has its ledger row, written before the call.
    const vendorDuring = vendorCalls() - vendorAtStart;
    expect(vendorDuring).toBe(warmCalls + 1);
    expect(vendorDuring, 'vendor calls during the test ≤ tool calls with a tool_call.started event').toBeLessThanOrEqual((await startedCalls()) - startedAtStart);

    // The sealer ran every 200 ms (LEDGER_SEAL_INTERVAL_MS) through the outage, more than 30 failed passes: on-call reads
    // one warning when it began and one line when it ended, not a line per pass (PeriodicTask).
    await waitFor(async () => gw.output().slice(outputAtStart).includes('sealing works again after'), 'the sealer to log its recovery', 10_000, 100);
    const sealerLines = gw.output().slice(outputAtStart).split('\n').filter((l) => /sealing (failed|still failing|works again)/.test(l));
    expect(sealerLines.length, sealerLines.join('\n')).toBeLessThanOrEqual(3 * 2); // each of up to 3 outages: its warning, its recovery
    expect(sealerLines.filter((l) => l.includes('sealing failed')).length).toBeGreaterThanOrEqual(1);
    expect(sealerLines.at(-1)).toMatch(/sealing works again after ([3-9]\d|\d{3,}) failed runs over/);
    // So does the approvals sweep's expiry step (every 5 s), which catches its own failure: a warning, not an error per pass.
    const expiryLines = gw.output().slice(outputAtStart).split('\n').filter((l) => /expiry of overdue approvals (failed|still failing)/.test(l));
    expect(expiryLines.length, expiryLines.join('\n')).toBeLessThanOrEqual(3);
    expect(expiryLines.every((l) => (JSON.parse(l) as { level: number }).level === 40), expiryLines.join('\n')).toBe(true);

    const exited = await Promise.race([gw.waitExit(), sleep(0).then(() => null)]);
    expect(exited).toBeNull(); // the same process, never restarted
  }, 90_000);

  /** Posts a note write held at the vendor for `holdMs`; resolves once the write has reached the vendor. */
  async function writeHeldAtVendor(note: string, holdMs: number) {
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1002', note });
    const before = noteWrites();
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: holdMs, times: 1 });
    const pending = postToolUse(gw.http, org.runId, org.agentKey, use);
    const first = await Promise.race([waitFor(() => noteWrites() === before + 1, 'the write to reach the vendor').then(() => null), pending]);
    if (first) throw new Error(`the write did not reach the vendor: ${first.status} ${first.text}\n${gw.output().split('\n').filter((l) => l.includes(String(JSON.parse(first.text).correlationId))).join('\n')}`);
    return { use, pending, arrivedAt: performance.now(), before };
  }
  const noteWrites = () => emu.requests.filter((r) => r.body.includes('orderUpdate')).length;

  it('a database back within seconds takes the outcome of a write that was at the vendor: the request answers it', async () => {
    // The vendor answers 1 s after the write arrived: the outcome write then finds the database down, if PostgreSQL
    // stopped within that second. A loaded machine can take longer to stop it: then the attempt does not count (the
    // outcome may have been written before), the database comes back and the write is held again.
    let held: Awaited<ReturnType<typeof writeHeldAtVendor>>;
    let write: (typeof emu.requests)[number];
    for (let attempt = 1; ; attempt++) {
      held = await writeHeldAtVendor(`database back soon ${attempt}`, 1_000);
      await stopDatabase();
      const stoppedAt = performance.timeOrigin + performance.now();
      const note = held.use.input.note as string;
      write = await waitFor(() => emu.requests.find((r) => r.body.includes('orderUpdate') && r.body.includes(note) && r.finishedAt !== undefined), 'the vendor to answer the held write');
      // The database really was down when the vendor answered (emulator times are performance.timeOrigin +
      // performance.now() too).
      if (stoppedAt < write.finishedAt!) break;
      expect(attempt, 'PostgreSQL stopped before the vendor answered (1 s hold), in one of 3 attempts').toBeLessThan(3);
      await startDatabase();
      await held.pending;
      await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
    }
    const { pending, before } = held;
    const t0 = performance.now();
    expect(performance.timeOrigin + t0, 'PostgreSQL started only after the vendor answered').toBeGreaterThan(write.finishedAt!);
    await startDatabase();
    const startMs = performance.now() - t0;
    const res = await pending;
    expect(res.status, `${res.status} ${res.text} (PostgreSQL took ${Math.round(startMs)} ms to start)`).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', replayed: false });
    expect(noteWrites()).toBe(before + 1);
    await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
  }, 60_000);

  it('a write at the vendor when the database stays away answers 503 saying so; its outcome is recorded when the database is back, never executed twice', async () => {
    const { use, pending, before } = await writeHeldAtVendor('in flight during the outage', 1_500);
    await stopDatabase();
    const res = await pending;
    expectUnavailable(res, 'the outcome could not be recorded');
    // Not "nothing happened": the caller learns the call ran, which call it is, and not to send it under a new id.
    const problem = JSON.parse(res.text) as Record<string, unknown>;
    expect(problem).toMatchObject({ outcomeConfirmed: false, toolCallId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(problem.detail).toMatch(/vendor was called/);
    await sleep(1_000); // the kept outcome keeps failing for a while; the process rides it out

    await startDatabase();
    await waitFor(async () => (await gw.http.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000, 200);
    // The outcome kept in memory lands: a resend of the same tool_use reads it (409 in progress until then).
    let again = await postToolUse(gw.http, org.runId, org.agentKey, use);
    await waitFor(
      async () => {
        again = await postToolUse(gw.http, org.runId, org.agentKey, use);
        if (again.status === 409) expect(again.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
        return again.status !== 409;
      },
      'the kept outcome to be recorded',
      20_000,
      250,
    );
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ toolCallId: problem.toolCallId, status: 'succeeded', replayed: true });
    expect(noteWrites()).toBe(before + 1);
    const events = await gw.http.get(`/v1/tool-calls/${problem.toolCallId as string}`).set(bearer(org.adminKey));
    expect(events.status).toBe(200);
    expect(events.body).toMatchObject({ status: 'succeeded' });
    // On-call reads the same story in the log: the outcome kept, with what the write met, then recorded.
    const lines = gw
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{') && l.includes(problem.toolCallId as string))
      .map((l) => JSON.parse(l) as { msg: string; level: number; code?: string; cause?: string; status?: string });
    expect(lines.find((l) => l.msg === 'outcome not recorded yet (database unavailable): kept in memory, retrying')).toMatchObject({
      level: 40,
      status: 'succeeded',
      code: expect.any(String),
      cause: expect.any(String),
    });
    expect(lines.find((l) => l.msg === 'outcome recorded after the database came back')).toMatchObject({ level: 30, status: 'succeeded' });
  }, 60_000);

  it('the gateway wrote no secret and no crash to its output', () => {
    const out = gw.output();
    expect(leakedIn(out, secretNeedles([org.agentKey, org.adminKey]))).toEqual([]);
    expect(out).not.toMatch(/fatal:|uncaught|unhandled rejection/i);
  });
});
