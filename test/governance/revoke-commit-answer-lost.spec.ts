/**
 * The flags', policies' and credentials' caches are invalidated in a `finally` ("even if it failed: it may have
 * committed"); a key's revocation forgot the key only once its transaction resolved. When the COMMIT's answer is lost
 * (the connection reset after the server committed), the key was revoked in the database while the replica that made
 * the change kept accepting it from its cache for up to 5 s (README: "at once on the replica that made it").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

describe('API key revocation whose commit answer is lost', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a key revoked in the database is not accepted any more by the replica that revoked it', async () => {
    const orgId = await createOrg(t, 'revoke-commit-lost');
    const victim = await createKey(t, orgId, 'ops');
    const read = () => t.http.get(`/v1/orgs/${orgId}/feature-flags`).set(bearer(victim.key));
    expect((await read()).status).toBe(200); // cached as valid on this replica

    const svc = t.app.get(ApiKeysService) as unknown as { ds: DataSource };
    const realDs = svc.ds;
    let lose = true;
    // The transaction commits on the server, and the client then loses the connection before the COMMIT's answer.
    svc.ds = new Proxy(realDs, {
      get(target, prop, receiver) {
        if (prop === 'transaction') {
          return async (...args: unknown[]) => {
            const out = await (target.transaction as (...a: unknown[]) => Promise<unknown>)(...args);
            if (lose) {
              lose = false;
              throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
            }
            return out;
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    try {
      const del = await t.http.delete(`/v1/api-keys/${victim.id}`).set(adminAuth);
      const [row] = (await t.ds.query('SELECT revoked_at FROM api_keys WHERE id = $1', [victim.id])) as { revoked_at: Date | null }[];
      expect(row.revoked_at, `revoked in the database (DELETE answered ${del.status})`).not.toBeNull();
      const after = await read();
      expect(after.status, 'the revoked key still reads on the replica that revoked it').toBe(401);
    } finally {
      svc.ds = realDs;
    }
  });
});
