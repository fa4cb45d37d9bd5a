import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClockSyncService } from '../../src/common/clock-sync.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

/**
 * The times the admin writes stamp (a flag's, policy's, permission's or credential's updatedAt, an org's and a key's
 * createdAt, revokedAt and lastUsedAt) are the database's (the Clock), as the calls' and events' are (PostgreSQL's
 * now()): on a replica whose host clock is 30 s off, a kill switch still reads as turned off after the calls it let
 * through, on its own event's time line, and a key's last use never lands after its revocation.
 */
const SKEW_MS = 30_000;

describe('admin writes are stamped on the database\'s clock', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    vi.useRealTimers();
    await h?.t.app.get(ClockSyncService).sync();
    await h?.close();
  });

  const dbNowMs = async () => ((await h.t.ds.query(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`)) as [{ ms: number }])[0].ms;

  it('a kill switch flipped on a host 30 s behind the database has an updatedAt after the calls it let through, on its event\'s time line', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.status, JSON.stringify(call.body)).toBe(200);
    const story = (await h.t.http.get(`/v1/tool-calls/${call.body.toolCallId}`).set(adminAuth)).body as { createdAt: string; status: string };
    expect(story.status).toBe('succeeded');

    // This host's wall clock is 30 s behind the database's from here on (only Date; timers and performance.now run on).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - SKEW_MS, shouldAdvanceTime: true });
    try {
      await h.t.app.get(ClockSyncService).sync(); // the minute's reading: logs the skew, the Clock stays on the database's time
      const off = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
      expect(off.status).toBe(200);
      const [event] = (await h.t.ds.query(
        `SELECT created_at FROM runtime_ledger_events WHERE org_id = $1 AND type = 'feature_flag.changed' ORDER BY seq DESC LIMIT 1`,
        [org.orgId],
      )) as { created_at: Date }[];
      const updatedAt = Date.parse(off.body.updatedAt as string);
      // The call was recorded before the switch was turned off: the switch's time must come after it ...
      expect(updatedAt, `flag updatedAt ${off.body.updatedAt} vs call createdAt ${story.createdAt}`).toBeGreaterThanOrEqual(Date.parse(story.createdAt));
      // ... and sit on the time line of its own feature_flag.changed event (PostgreSQL's now()).
      expect(Math.abs(updatedAt - event.created_at.getTime()), `flag updatedAt ${off.body.updatedAt} vs its event ${event.created_at.toISOString()}`).toBeLessThan(2_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an API key created on such a host has the createdAt of its api_key.created event, not 30 s before the database\'s now', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - SKEW_MS, shouldAdvanceTime: true });
    try {
      const before = await dbNowMs();
      const res = await h.t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: null, role: 'ops', name: 'skewed' });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const createdAt = Date.parse(res.body.createdAt as string);
      const [event] = (await h.t.ds.query(
        `SELECT created_at FROM runtime_ledger_events WHERE type = 'api_key.created' AND metadata->>'apiKeyId' = $1`,
        [res.body.id],
      )) as { created_at: Date }[];
      expect(createdAt, `key createdAt ${res.body.createdAt}, database time before the request ${new Date(before).toISOString()}`).toBeGreaterThanOrEqual(before - 1_000);
      expect(Math.abs(createdAt - event.created_at.getTime())).toBeLessThan(2_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a key used on a replica 30 s ahead and revoked on one in time lists a lastUsedAt no later than its revokedAt', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ops = await createKey(h.t, org.orgId, 'ops');
    // Used on a replica whose host is 30 s ahead of the database (one process here: its Date, then set right).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + SKEW_MS, shouldAdvanceTime: true });
    try {
      expect((await h.t.http.get('/v1/tool-calls?limit=1').set(bearer(ops.key))).status).toBe(200);
    } finally {
      vi.useRealTimers();
    }
    // Revoked a moment later on a replica on time.
    expect((await h.t.http.delete(`/v1/api-keys/${ops.id}`).set(adminAuth)).status).toBe(204);
    await (h.t.app.get(ApiKeysService) as unknown as { flushLastUsed(): Promise<void> }).flushLastUsed();
    const listed = (await h.t.http.get(`/v1/api-keys?orgId=${org.orgId}`).set(adminAuth)).body.items as { id: string; revokedAt: string; lastUsedAt: string }[];
    const key = listed.find((k) => k.id === ops.id)!;
    expect(Date.parse(key.lastUsedAt), `lastUsedAt ${key.lastUsedAt} vs revokedAt ${key.revokedAt}`).toBeLessThanOrEqual(Date.parse(key.revokedAt));
  });
});
