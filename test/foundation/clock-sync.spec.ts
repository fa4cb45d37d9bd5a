import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClockSyncService } from '../../src/common/clock-sync.service.js';
import { Clock } from '../../src/common/clock.js';
import { decidedRefund } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, createKey } from '../support/test-app.js';

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

  it('a host clock 30 s ahead is corrected at the next sync: the gateway\'s now is the database\'s', async () => {
    const host = vi.spyOn(clock, 'hostNowMs').mockImplementation(() => Date.now() + 30_000);
    try {
      expect(Math.abs(clock.nowMs() - (await dbNowMs()))).toBeGreaterThan(25_000); // skewed until measured
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
});
