import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { LOCK_SQL } from '../../src/db/advisory-locks.js';
import { waitsOnLock } from '../support/lock-waits.js';
import { withQueryHook } from '../support/query-hook.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * Two admins replace an org's credentials at once (two replicas, or one slow request). The config stored last must
 * carry the latest updatedAt: before, each PUT took its time before its write waited for the other's row, so the PUT
 * that committed last could store (and GET list) a time older than the one the PUT it replaced had already answered.
 * Now PUTs and DELETEs of one integration's credentials take turns (an advisory lock), each taking its time once its
 * turn has come, as flags and policies do.
 */
const nango = (secretKey: string) => ({ config: { secretKey, connectionId: 'conn-1', providerConfigKey: 'shopify-cfg' } });

describe('credentials PUT racing another PUT', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('the config stored last carries the latest updatedAt any PUT answered', async () => {
    const svc = t.app.get(CredentialsService, { strict: false }) as unknown as { ds: DataSource };
    const real = svc.ds;
    const orgId = await createOrg(t, 'cred-race');
    let holdOne = true;
    let entered!: () => void;
    const enteredP = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // The first PUT's write is delayed before it is sent (a slow request, a GC pause, another replica's network).
    svc.ds = withQueryHook(real, async (sql) => {
      if (holdOne && sql.includes('INSERT INTO integration_credentials')) {
        holdOne = false;
        entered();
        await gate;
      }
    });
    try {
      const a = t.http.put(`/v1/orgs/${orgId}/integrations/nango/credentials`).set(adminAuth).send(nango('secret-AAAAAAAA')).then((r) => r);
      await enteredP;
      let bAnswered = false;
      const b = t.http
        .put(`/v1/orgs/${orgId}/integrations/nango/credentials`)
        .set(adminAuth)
        .send(nango('secret-BBBBBBBB'))
        .then((r) => ((bAnswered = true), r));
      // B either answers (it did not wait for A) or waits for A's turn to end: no timing decides it.
      await waitFor(async () => bAnswered || (await waitsOnLock(t.ds, LOCK_SQL)), 'the second PUT answered or waiting');
      await new Promise((r) => setTimeout(r, 20));
      release();
      const [ra, rb] = await Promise.all([a, b]);
      expect([ra.status, rb.status]).toEqual([200, 200]);
      const list = await t.http.get(`/v1/orgs/${orgId}/integrations`).set(adminAuth);
      const stored = (list.body as { items: { fingerprint: string; updatedAt: string }[] }).items[0];
      const latest = [ra.body, rb.body].sort((x, y) => Date.parse(y.updatedAt as string) - Date.parse(x.updatedAt as string))[0];
      expect(stored).toMatchObject({ fingerprint: latest.fingerprint, updatedAt: latest.updatedAt });
    } finally {
      release();
      svc.ds = real;
    }
  });
});
