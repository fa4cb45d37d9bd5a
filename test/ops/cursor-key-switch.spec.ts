import { beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { adminAuth, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * README "Rotating the master key", step 1: MASTER_ENCRYPTION_ACTIVE_KEY_ID moves from k1 to k2 in a rolling
 * restart with both keys loaded, so for a while replicas behind one load balancer have different active keys.
 * A page cursor one replica issued must page on the other; one signed under a key no longer loaded is a 400.
 * The apps run one after the other on the shared database, as replicas before and after the switch.
 */
const K1_ACTIVE = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k1:${TEST_MASTER_KEY},k2:${TEST_MASTER_KEY_2}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' };
const K2_ACTIVE = { ...K1_ACTIVE, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };
const ONLY_K2 = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2}` };

interface Page {
  items: { id: string }[];
  nextCursor: string | null;
}

describe('page cursors across the master-key switch', () => {
  let org: string;
  /** every event id of the org, newest first, as the listing orders them */
  let events: string[];
  /** every API key id of the org, newest first */
  let keys: string[];
  /** second pages' cursors, issued by a replica with k1 active */
  let k1Events: string;
  let k1Keys: string;
  let k2Events: string;

  const eventsPage = (t: TestApp, cursor?: string) =>
    t.http.get('/v1/ledger/events').query({ orgId: org, limit: '2', ...(cursor ? { cursor } : {}) }).set(adminAuth);
  const keysPage = (t: TestApp, cursor?: string) => t.http.get('/v1/api-keys').query({ orgId: org, limit: '2', ...(cursor ? { cursor } : {}) }).set(adminAuth);

  async function withApp<T>(env: Record<string, string>, fn: (t: TestApp) => Promise<T>): Promise<T> {
    const t = await startTestApp({ ...env, LEDGER_SEAL_INTERVAL_MS: '60000' });
    try {
      return await fn(t);
    } finally {
      await t.close();
    }
  }

  beforeAll(async () => {
    await withApp(K1_ACTIVE, async (t) => {
      org = await createOrg(t, 'Cursor key switch');
      await t.app.get(LedgerEventsService).append(Array.from({ length: 5 }, (_, i) => ({ orgId: org, type: 'test.step', metadata: { i } })));
      for (let i = 0; i < 3; i++) await createKey(t, org, 'agent');
      events = ((await t.ds.query('SELECT id FROM runtime_ledger_events WHERE org_id = $1 ORDER BY created_at DESC, seq DESC', [org])) as { id: string }[]).map(
        (r) => r.id,
      );
      keys = ((await t.ds.query('SELECT id FROM api_keys WHERE org_id = $1 ORDER BY created_at DESC, id DESC', [org])) as { id: string }[]).map((r) => r.id);
      const first = await eventsPage(t);
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      k1Events = (first.body as Page).nextCursor!;
      k1Keys = ((await keysPage(t)).body as Page).nextCursor!;
    });
    expect(events.length).toBeGreaterThanOrEqual(5);
    expect(keys).toHaveLength(3);
  });

  it('a cursor from a replica with k1 active pages on one with k2 active (both loaded), and the reverse', async () => {
    await withApp(K2_ACTIVE, async (t) => {
      const second = await eventsPage(t, k1Events);
      expect(second.status, JSON.stringify(second.body)).toBe(200);
      expect((second.body as Page).items.map((e) => e.id)).toEqual(events.slice(2, 4));
      // the API-key listing shares the codec
      const keysSecond = await keysPage(t, k1Keys);
      expect(keysSecond.status, JSON.stringify(keysSecond.body)).toBe(200);
      expect((keysSecond.body as Page).items.map((k) => k.id)).toEqual(keys.slice(2, 3));
      k2Events = (second.body as Page).nextCursor!;
      expect(k2Events).toBeTruthy();
    });
    // A replica not yet restarted (k1 active) takes the cursor the k2 replica issued.
    await withApp(K1_ACTIVE, async (t) => {
      const third = await eventsPage(t, k2Events);
      expect(third.status, JSON.stringify(third.body)).toBe(200);
      expect((third.body as Page).items.map((e) => e.id)).toEqual(events.slice(4, 6));
    });
  });

  it('once k1 is unloaded its cursors are a 400 (VALIDATION_FAILED); k2 cursors still page', async () => {
    await withApp(ONLY_K2, async (t) => {
      for (const res of [await eventsPage(t, k1Events), await keysPage(t, k1Keys)]) {
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect((res.body as { code: string }).code).toBe('VALIDATION_FAILED');
      }
      const third = await eventsPage(t, k2Events);
      expect(third.status, JSON.stringify(third.body)).toBe(200);
      expect((third.body as Page).items.map((e) => e.id)).toEqual(events.slice(4, 6));
    });
  });
});
