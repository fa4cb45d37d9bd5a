import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { ToolPermissionEntity } from '../../src/permissions/tool-permission.entity.js';
import { ToolPermissionsService } from '../../src/permissions/tool-permissions.service.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { allow, type PermissionItem } from './governance.helpers.js';

/**
 * PUT /v1/orgs/:orgId/tool-permissions answers the set it wrote, as a GET would
 * list it — never the set of another PUT that committed just after it.
 */
describe('tool permissions: each PUT answers its own set', () => {
  let t: TestApp;
  const put = (org: string, items: PermissionItem[]) => t.http.put(`/v1/orgs/${org}/tool-permissions`).set(adminAuth).send({ items });
  /** A set of its own per request (one specialist each), two rows in list order. */
  const setOf = (n: number): PermissionItem[] => [allow('order_lookup', 'lookup', `bot-${n}`), allow('shopify_query', 'get_product', `bot-${n}`)];

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a PUT committing between another PUT’s commit and its answer does not change that answer', async () => {
    const org = await createOrg(t, 'Perm Race Co');
    const svc = t.app.get(ToolPermissionsService, { strict: false });
    const holder = svc as unknown as { ds: DataSource };
    const real = holder.ds;
    // The first read of the permission rows outside a transaction waits until the second PUT has answered.
    let reachedRead!: () => void;
    const readReached = new Promise<void>((r) => (reachedRead = r));
    let releaseRead!: () => void;
    const readReleased = new Promise<void>((r) => (releaseRead = r));
    let gated = false;
    holder.ds = new Proxy(real, {
      get(target, prop) {
        if (prop !== 'getRepository') return Reflect.get(target, prop, target) as unknown;
        return (entity: unknown) => {
          const repo = target.getRepository(entity as typeof ToolPermissionEntity);
          if (entity !== ToolPermissionEntity || gated) return repo;
          gated = true;
          return new Proxy(repo, {
            get(r, p) {
              if (p !== 'find') return Reflect.get(r, p, r) as unknown;
              return async (...args: Parameters<typeof repo.find>) => {
                reachedRead();
                await readReleased;
                return r.find(...args);
              };
            },
          });
        };
      },
    }) as DataSource;
    try {
      const first = put(org, setOf(1)).then((res) => res); // a Promise: awaiting the request itself twice would send it twice
      // Either the first PUT answered already (it read what it wrote) or it waits to read after its commit.
      await Promise.race([first, readReached]);
      const second = await put(org, setOf(2));
      expect(second.status).toBe(200);
      releaseRead();
      const answered = await first;
      expect(answered.status).toBe(200);
      expect(answered.body).toEqual({ items: setOf(1) });
      expect(second.body).toEqual({ items: setOf(2) });
    } finally {
      releaseRead();
      holder.ds = real;
    }
  });

  it('80 PUTs at once with 80 different sets: every 200 answers the set it sent', async () => {
    const org = await createOrg(t, 'Perm Burst Co');
    for (let round = 0; round < 4; round++) {
      const sets = Array.from({ length: 20 }, (_, i) => setOf(round * 20 + i));
      const answers = await Promise.all(sets.map((s) => put(org, s)));
      answers.forEach((res, i) => {
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ items: sets[i] });
      });
    }
  });
});
