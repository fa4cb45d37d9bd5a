import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { REVOKE_TURN_SQL } from '../../src/db/advisory-locks.js';
import { FeatureFlagsService } from '../../src/orgs/feature-flags.service.js';
import { waitsOnLock } from '../support/lock-waits.js';
import { withQueryHook } from '../support/query-hook.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * An org admin key K is revoked while one of its writes (a flag PUT) is past its waits, holding K FOR SHARE
 * (holdActorKey): the revocation waits for it (README: "a revocation waits only for writes already past their
 * waits"). Then K begins another write, creating an API key. Before, that write's FOR SHARE passed the revocation
 * already waiting (row locks let a share lock in ahead of a queued UPDATE): the key was created, and the revocation,
 * whose revokedAt was taken before it waited, was recorded with a time before that creation, and K's lastUsedAt after
 * its revokedAt. Now a write takes the key's advisory lock shared first and the revocation takes it alone
 * (advisory-locks.ts, "Fair turns"): the creation waits for the revocation and is refused 401.
 */
describe('a write an API key begins while its revocation waits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is refused 401, never recorded after the revokedAt', async () => {
    const flags = t.app.get(FeatureFlagsService, { strict: false }) as unknown as { ds: DataSource };
    const real = flags.ds;
    try {
      for (let round = 0; round < 3; round++) {
        const org = await createOrg(t, `revoke-queue-${round}`);
        const k = await createKey(t, org, 'admin');
        // K's flag PUT is held after holdActorKey (at its ledger insert), holding K.
        let entered!: () => void;
        const inside = new Promise<void>((r) => (entered = r));
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let armed = true;
        flags.ds = withQueryHook(real, async (sql) => {
          if (armed && sql.includes('INSERT INTO runtime_ledger_events')) {
            armed = false;
            entered();
            await gate;
          }
        });
        const flagPut = t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(bearer(k.key)).send({ enabled: true }).then((r) => r);
        await inside;
        const revoke = t.http.delete(`/v1/api-keys/${k.id}`).set(adminAuth).then((r) => r);
        await waitFor(
          async () => (await waitsOnLock(t.ds, REVOKE_TURN_SQL)) || (await waitsOnLock(t.ds, '%UPDATE "api_keys"%')),
          'the revocation waiting for the flag PUT',
        );
        let createAnswered = false;
        const create = t.http
          .post('/v1/api-keys')
          .set(bearer(k.key))
          .send({ orgId: org, role: 'agent', name: `made-by-k-${round}` })
          .then((r) => ((createAnswered = true), r));
        // The creation either answered (it passed the revocation) or waits: no timing decides it.
        await waitFor(async () => createAnswered || (await waitsOnLock(t.ds, '%FROM api_keys, fair%')), 'the creation answered or waiting');
        release();
        const [put, revoked, created] = await Promise.all([flagPut, revoke, create]);
        expect(put.status).toBe(200);
        expect(revoked.status).toBe(204);
        const [row] = (await t.ds.query('SELECT revoked_at FROM api_keys WHERE id = $1', [k.id])) as { revoked_at: Date }[];
        expect(created.status, `round ${round}: created ${created.body.createdAt as string}, K revoked at ${row.revoked_at.toISOString()}`).toBe(401);
        // The listing flushes lastUsedAt: a key's last use is never recorded after its revocation.
        const list = (await t.http.get('/v1/api-keys').query({ orgId: org }).set(adminAuth)).body as { items: { id: string; revokedAt: string; lastUsedAt: string | null }[] };
        const kv = list.items.find((i) => i.id === k.id)!;
        if (kv.lastUsedAt) expect(Date.parse(kv.lastUsedAt)).toBeLessThanOrEqual(Date.parse(kv.revokedAt));
      }
    } finally {
      flags.ds = real;
    }
  });
});
