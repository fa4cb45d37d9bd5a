import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClockSyncService } from '../../src/common/clock-sync.service.js';
import { Clock } from '../../src/common/clock.js';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { decidedRefund, refundUse } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

const TTL_SECONDS = 600;

/**
 * The gateway reads the database's time (Clock, ClockSyncService). Before, approval expiry and decision times came
 * from each replica's host clock while created_at, finished_at and the events came from PostgreSQL's: a replica whose
 * clock was 30 s ahead recorded an approval decided after its call had finished and an expiresAt 30 s past
 * createdAt + APPROVAL_TTL_SECONDS, and replicas seconds apart disagreed on whether an approval had expired.
 */
describe('the clock is the database\'s', () => {
  let h: Harness;
  let clock: Clock;
  let sync: ClockSyncService;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: String(TTL_SECONDS) });
    clock = h.t.app.get(Clock);
    sync = h.t.app.get(ClockSyncService);
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await sync?.sync();
    await h?.close();
  });

  const dbNowMs = async () => ((await h.t.ds.query(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`)) as [{ ms: number }])[0].ms;

  it('a host clock 30 s ahead moves nothing: the gateway\'s now is the database\'s, and the next reading says how far off the host is', async () => {
    const host = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() + 30_000);
    try {
      // Between two readings time runs on the monotonic clock from the last one: the wall clock's step is not seen.
      expect(Math.abs(clock.nowMs() - (await dbNowMs()))).toBeLessThan(250);
      const correction = await sync.sync();
      expect(correction).not.toBeNull();
      expect(Math.abs(correction! + 30_000)).toBeLessThan(250);
      expect(Math.abs(clock.nowMs() - (await dbNowMs()))).toBeLessThan(250);
      expect(h.t.logs.some((l) => l.includes("this host's clock is off the database's"))).toBe(true);
    } finally {
      host.mockRestore();
      await sync.sync();
    }
  });

  it('a host clock stepped 2 h forward between two readings (a resumed VM set right by NTP) expires no approval early', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const submitted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00', '12345'));
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const id = submitted.body.toolCallId as string;
    // Its clock 2 h behind when the minute's reading is taken ...
    const behind = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() - 2 * 3_600_000);
    try {
      await sync.sync();
    } finally {
      behind.mockRestore(); // ... then stepped to the right time, before the next reading
    }
    // Before, the gateway's now was the stale correction on the new wall clock: 2 h ahead, and this pass (every 5 s)
    // expired the approval with an hour of its TTL left on the database's clock.
    expect(Math.abs(clock.nowMs() - (await dbNowMs()))).toBeLessThan(250);
    await h.t.app.get(ApprovedCallRunner).sweep();
    const [row] = (await h.t.ds.query(
      `SELECT t.status, t.error_code, a.status AS approval FROM tool_calls t JOIN approval_requests a ON a.tool_call_id = t.id WHERE t.id = $1`,
      [id],
    )) as { status: string; error_code: string | null; approval: string }[];
    expect(row).toEqual({ status: 'waiting_approval', error_code: null, approval: 'pending' });
    await sync.sync();
  });

  it('after a suspend of 2 h (the monotonic clock stood still, the wall and boot clocks did not) an approval asked for at once lives its TTL', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    await sync.sync(); // the last reading before the host was suspended
    const real = clock.monotonicMs.bind(clock);
    const suspended = vi.spyOn(clock, 'monotonicMs').mockImplementation(() => real() - 2 * 3_600_000);
    let id: string;
    try {
      // No reading in between: before, the gateway's now was 2 h behind until the next one, and this approval's
      // expiry (now + TTL) lay in its past.
      expect(Math.abs(clock.nowMs() - (await dbNowMs()))).toBeLessThan(250);
      const submitted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00', '12345'));
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
      id = submitted.body.toolCallId as string;
    } finally {
      suspended.mockRestore();
      await sync.sync();
    }
    await h.t.app.get(ApprovedCallRunner).sweep();
    const story = (await h.t.http.get(`/v1/tool-calls/${id}`).set(adminAuth)).body as { status: string; approval: { status: string; createdAt: string; expiresAt: string } };
    const lifeMs = Date.parse(story.approval.expiresAt) - Date.parse(story.approval.createdAt);
    expect(Math.abs(lifeMs - TTL_SECONDS * 1000)).toBeLessThan(1_000);
    expect([story.status, story.approval.status]).toEqual(['waiting_approval', 'pending']);
    await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({});
  });

  it('on such a host an approval lives APPROVAL_TTL_SECONDS from its creation and is decided before its call starts and finishes', async () => {
    const host = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() + 30_000);
    try {
      await sync.sync();
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
      const expert = await createKey(h.t, org.orgId, 'expert');
      const { id, settled } = await decidedRefund(h, org, expert.key, '3.00', 'approve');
      expect(settled.status).toBe('succeeded');
      const story = (await h.t.http.get(`/v1/tool-calls/${id}`).set(adminAuth)).body as {
        approval: { createdAt: string; expiresAt: string; decidedAt: string };
        startedAt: string;
        finishedAt: string;
      };
      const ms = (iso: string) => Date.parse(iso);
      expect(Math.abs(ms(story.approval.expiresAt) - ms(story.approval.createdAt) - TTL_SECONDS * 1000)).toBeLessThan(1_000);
      expect(ms(story.approval.decidedAt)).toBeLessThanOrEqual(ms(story.startedAt));
      expect(ms(story.approval.decidedAt)).toBeLessThanOrEqual(ms(story.finishedAt));
    } finally {
      host.mockRestore();
      await sync.sync();
    }
  });

  /** The database as a replica starting during a slow spell meets it: every answer 600 ms late (over the 500 ms a reading is placed within). */
  const slowDatabase = (): DataSource =>
    ({
      query: async (text: string, params?: unknown[]) => {
        await sleep(600);
        return h.t.ds.query(text, params);
      },
    }) as unknown as DataSource;

  it('a replica starting while the database answers slowly still takes its first reading: a host 2 h ahead expires no approval, and the slow reading is logged', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const submitted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00', '12345'));
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const id = submitted.body.toolCallId as string;
    // Another replica starting: no reading yet, a host 2 h ahead, and a start-up reading that takes 600 ms.
    (clock as unknown as { anchor: unknown }).anchor = null;
    const host = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() + 2 * 3_600_000);
    const starting = new ClockSyncService(slowDatabase(), clock);
    const logsBefore = h.t.logs.length;
    await starting.onModuleInit();
    try {
      const offMs = clock.nowMs() - (await dbNowMs());
      const said = h.t.logs.slice(logsBefore).filter((l) => l.includes('ClockSync'));
      await h.t.app.get(ApprovedCallRunner).sweep(); // what the sweeps started next judge expiry on
      const [row] = (await h.t.ds.query(
        `SELECT t.status, t.error_code, a.status AS approval FROM tool_calls t JOIN approval_requests a ON a.tool_call_id = t.id WHERE t.id = $1`,
        [id],
      )) as { status: string; error_code: string | null; approval: string }[];
      expect({ gatewayOffDbMinutes: Math.round(offMs / 60_000), row }).toEqual({
        gatewayOffDbMinutes: 0,
        row: { status: 'waiting_approval', error_code: null, approval: 'pending' },
      });
      expect(said.some((l) => l.includes('answered slowly: the gateway') && l.includes('roundTripMs'))).toBe(true);
    } finally {
      await starting.onApplicationShutdown();
      host.mockRestore();
      await sync.sync();
      await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({});
    }
  });

  it('a slow reading after a good one keeps the last correction and is logged once while readings stay slow', async () => {
    await sync.sync();
    const before = clock.nowMs() - (await dbNowMs());
    const host = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() + 2 * 3_600_000);
    const slow = new ClockSyncService(slowDatabase(), clock);
    const logsBefore = h.t.logs.length;
    try {
      expect(await slow.sync()).toBeNull();
      expect(await slow.sync()).toBeNull();
      const after = clock.nowMs() - (await dbNowMs());
      expect(Math.abs(after - before)).toBeLessThan(1_000); // still the database's time, not the host's 2 h ahead
      const said = h.t.logs.slice(logsBefore).filter((l) => l.includes('answered too slowly to be read'));
      expect(said).toHaveLength(1);
    } finally {
      host.mockRestore();
      await sync.sync();
    }
  });

  it('a slow first reading is replaced by a later one with a shorter round trip, even one still over 500 ms', async () => {
    const BASE = 1_800_000_000_000; // the database's time at virtual 0; this host's wall clock agrees with it
    let now = 0; // virtual monotonic ms
    const virtual = new Clock();
    virtual.monotonicMs = () => now;
    virtual.hostNowMs = () => BASE + now;
    virtual.bootNowMs = () => null;
    const trips = [
      { readAfterMs: 0, backMs: 20_000 }, // read at once, the answer 20 s on its way back: placed 10 s off
      { readAfterMs: 350, backMs: 350 },
      { readAfterMs: 350, backMs: 350 },
    ];
    const ds = {
      query: async () => {
        const trip = trips.shift()!;
        now += trip.readAfterMs;
        const ms = BASE + now;
        now += trip.backMs;
        return [{ ms }];
      },
    } as unknown as DataSource;
    const virtualSync = new ClockSyncService(ds, virtual);
    expect(await virtualSync.sync()).not.toBeNull();
    expect(virtual.nowMs() - (BASE + now)).toBe(-10_000);
    now += 60_000;
    expect(await virtualSync.sync()).not.toBeNull(); // 700 ms: slow, but far tighter than 20 s
    expect(Math.abs(virtual.nowMs() - (BASE + now))).toBeLessThanOrEqual(350);
    now += 60_000;
    expect(await virtualSync.sync()).toBeNull(); // no tighter than the one placed: dropped
  });
});
