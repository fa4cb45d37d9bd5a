import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import type { Principal } from '../../src/auth/principal.js';
import { FeatureFlagEntity } from '../../src/orgs/feature-flag.entity.js';
import { FeatureFlagsService } from '../../src/orgs/feature-flags.service.js';
import { PoliciesService } from '../../src/policy/policies.service.js';
import { PolicyEntity } from '../../src/policy/policy.entity.js';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { IntegrationCredentialEntity } from '../../src/credentials/integration-credential.entity.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';

/**
 * The per-org flags and policies caches against a read that began before an
 * admin's PUT committed and finished after it: the change must be in force for
 * every call that arrives after the PUT answered, on the replica that made it.
 */

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Wraps `svc.ds` so that `method` calls on `entity`'s repository for `orgId` (its `where.orgId`) are counted,
 * and the next one after holdNext() runs its query at once (it sees the data as it is then) but answers only
 * on release(). Every query still goes to the real database; calls for other orgs pass through untouched.
 */
function tapReads(svc: object, entity: EntityTarget<ObjectLiteral>, method: 'find' | 'findOne', orgId?: string) {
  const holder = svc as { ds: DataSource };
  const real = holder.ds;
  let reads = 0;
  let next: { read: ReturnType<typeof deferred>; gate: ReturnType<typeof deferred> } | null = null;
  const gates: ReturnType<typeof deferred>[] = [];
  const ofOrg = (args: unknown[]): boolean => orgId === undefined || (args[0] as { where?: { orgId?: unknown } } | undefined)?.where?.orgId === orgId;
  holder.ds = new Proxy(real, {
    get(target, prop) {
      if (prop === 'getRepository') {
        return (e: EntityTarget<ObjectLiteral>) => {
          const repo = target.getRepository(e);
          if (e !== entity) return repo;
          return new Proxy(repo, {
            get(r, p) {
              if (p !== method) return Reflect.get(r, p, r) as unknown;
              return async (...args: unknown[]) => {
                const result = (await (r[method] as (...a: unknown[]) => Promise<unknown>)(...args)) as unknown;
                if (!ofOrg(args)) return result;
                reads++;
                const held = next;
                next = null;
                if (held) {
                  held.read.resolve();
                  await held.gate.promise;
                }
                return result;
              };
            },
          });
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    /** how many reads (of `orgId`) answered or are being held so far */
    reads: () => reads,
    holdNext() {
      next = { read: deferred(), gate: deferred() };
      gates.push(next.gate);
      return {
        /** resolves once the held read has its (soon stale) answer */
        read: next.read.promise,
        release: next.gate.resolve,
      };
    },
    restore: () => {
      for (const g of gates) g.resolve();
      holder.ds = real;
    },
  };
}

/** The next `method` read of `entity` through `svc` is held (see tapReads). */
function holdNextRead(svc: object, entity: EntityTarget<ObjectLiteral>, method: 'find' | 'findOne') {
  const tap = tapReads(svc, entity, method);
  return { ...tap.holdNext(), restore: tap.restore };
}

const within = <T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), ms))]);

describe('per-org caches vs. a read racing a change (the app’s services on the test database)', () => {
  let h: Harness;
  let admin: Principal;
  beforeAll(async () => {
    h = await startHarness();
    admin = { keyId: (await createKey(h.t, null, 'admin')).id, orgId: null, role: 'admin' };
  });
  afterAll(async () => {
    await h?.close();
  });
  const flagsOf = () => h.t.app.get(FeatureFlagsService, { strict: false });
  const policiesOf = () => h.t.app.get(PoliciesService, { strict: false });
  const BLOCK_ALL = [{ id: 'stop', match: { toolName: 'order_lookup.*' }, decision: 'block', reason: 'incident' }];
  /** A new org (nothing cached for it yet), tool calling enabled when `enabled`. */
  const freshOrg = async (enabled: boolean): Promise<string> => {
    const orgId = await createOrg(h.t, 'Cache race');
    if (enabled) await flagsOf().set(admin, orgId, 'tool_calling_enabled', true);
    return orgId;
  };

  it('flags: a read that began before set() committed is not cached once set() returned', async () => {
    const org = await freshOrg(true);
    const svc = flagsOf();
    const tap = tapReads(svc, FeatureFlagEntity, 'find', org);
    try {
      const held = tap.holdNext();
      const racing = svc.isEnabled(org, 'tool_calling_enabled');
      await within(held.read, 'the held flags read'); // it read "enabled" from the database
      await svc.set(admin, org, 'tool_calling_enabled', false);
      held.release();
      expect(await racing).toBe(true); // concurrent with the change: either answer is fine, this one read before it
      expect(await svc.isEnabled(org, 'tool_calling_enabled')).toBe(false);
      expect(tap.reads()).toBe(2); // the stale answer was not cached: the database was asked again
    } finally {
      tap.restore();
    }
  });

  it('flags: a caller arriving after set() returned does not join the read that began before it', async () => {
    const org = await freshOrg(true);
    const svc = flagsOf();
    const tap = tapReads(svc, FeatureFlagEntity, 'find', org);
    try {
      const held = tap.holdNext();
      const racing = svc.isEnabled(org, 'tool_calling_enabled');
      await within(held.read, 'the held flags read');
      await svc.set(admin, org, 'tool_calling_enabled', false);
      const after = svc.isEnabled(org, 'tool_calling_enabled'); // the stale read is still open
      expect(await within(after, 'a fresh flags read')).toBe(false);
      held.release();
      expect(await racing).toBe(true);
      expect(await svc.isEnabled(org, 'tool_calling_enabled')).toBe(false);
    } finally {
      tap.restore();
    }
  });

  it('flags: concurrent hot-path misses share one read; the admin read goes to the database and its answer is not the cached flags', async () => {
    const org = await freshOrg(false); // no flag row: the default (off)
    const svc = flagsOf();
    const tap = tapReads(svc, FeatureFlagEntity, 'find', org);
    try {
      expect(await Promise.all([svc.isEnabled(org, 'tool_calling_enabled'), svc.isEnabled(org, 'tool_calling_enabled')])).toEqual([false, false]);
      expect(tap.reads()).toBe(1);
      const all = await svc.all(org);
      expect(tap.reads()).toBe(2);
      all.tool_calling_enabled = true;
      expect(await svc.isEnabled(org, 'tool_calling_enabled')).toBe(false);
    } finally {
      tap.restore();
    }
  });

  it('policies: a read that began before replace() committed is not cached once replace() returned', async () => {
    const org = await freshOrg(true);
    const svc = policiesOf();
    const tap = tapReads(svc, PolicyEntity, 'findOne', org);
    try {
      const held = tap.holdNext();
      const racing = svc.rulesFor(org);
      await within(held.read, 'the held rules read'); // it read "no policy" from the database
      await svc.replace(admin, org, { rules: BLOCK_ALL });
      held.release();
      expect(await racing).toEqual({ rules: [], version: 0 });
      expect(await svc.rulesFor(org)).toMatchObject({ rules: [{ id: 'stop' }], version: 1 });
      expect(tap.reads()).toBe(2);
    } finally {
      tap.restore();
    }
  });

  it('policies: a caller arriving after replace() returned does not join the read that began before it', async () => {
    const org = await freshOrg(true);
    const svc = policiesOf();
    const tap = tapReads(svc, PolicyEntity, 'findOne', org);
    try {
      const held = tap.holdNext();
      const racing = svc.rulesFor(org);
      await within(held.read, 'the held rules read');
      await svc.replace(admin, org, { rules: BLOCK_ALL });
      const after = svc.rulesFor(org); // the stale read is still open
      expect((await within(after, 'a fresh rules read')).rules?.map((r) => r.id)).toEqual(['stop']);
      held.release();
      expect((await racing).rules).toEqual([]);
      expect((await svc.rulesFor(org)).rules?.map((r) => r.id)).toEqual(['stop']);
    } finally {
      tap.restore();
    }
  });
});

describe('kill switch and block rule vs. a read racing the PUT (gateway on the test database)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  const call = (runId: string, key: string) =>
    h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(key)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));

  it('PUT tool_calling_enabled=false answered 200 → the next tool call on this replica is 403 FEATURE_DISABLED', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const hold = holdNextRead(h.t.app.get(FeatureFlagsService, { strict: false }), FeatureFlagEntity, 'find');
    try {
      const racing = call(runId, agentKey).then((r) => r); // its flags read sees enabled, then waits
      await within(hold.read, 'the held flags read');
      const put = await h.t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
      expect(put.status).toBe(200);
      hold.release();
      await racing; // concurrent with the PUT: its answer is not asserted
      const next = await call(runId, agentKey);
      expect(next.status, JSON.stringify(next.body)).toBe(403);
      expect(next.body.errorCode).toBe('FEATURE_DISABLED');
    } finally {
      hold.restore();
    }
  });

  it('PUT policies with a block rule answered 200 → the next tool call on this replica is 403 POLICY_BLOCKED', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const hold = holdNextRead(h.t.app.get(PoliciesService, { strict: false }), PolicyEntity, 'findOne');
    try {
      const racing = call(runId, agentKey).then((r) => r); // its rules read sees no rules, then waits
      await within(hold.read, 'the held rules read');
      const rules = [{ id: 'no-lookups', match: { toolName: 'order_lookup.*' }, decision: 'block', reason: 'incident' }];
      const put = await h.t.http.put(`/v1/orgs/${orgId}/policies`).set(adminAuth).send({ rules });
      expect(put.status).toBe(200);
      hold.release();
      await racing;
      const next = await call(runId, agentKey);
      expect(next.status, JSON.stringify(next.body)).toBe(403);
      expect(next.body.errorCode).toBe('POLICY_BLOCKED');
    } finally {
      hold.restore();
    }
  });

  it('DELETE credentials answered 204 → the next tool call on this replica finds none (CREDENTIALS_NOT_FOUND), never the deleted ones', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const before = h.emu.requests.length;
    const hold = holdNextRead(h.t.app.get(CredentialsService, { strict: false }), IntegrationCredentialEntity, 'findOne');
    try {
      const racing = call(runId, agentKey).then((r) => r); // its credentials read sees the row, then waits
      await within(hold.read, 'the held credentials read');
      expect((await h.t.http.delete(`/v1/orgs/${orgId}/integrations/shopify/credentials`).set(adminAuth)).status).toBe(204);
      hold.release();
      await racing;
      const sentBefore = h.emu.requests.length;
      const next = await call(runId, agentKey);
      expect(next.body.errorCode, JSON.stringify(next.body)).toBe('CREDENTIALS_NOT_FOUND');
      expect(h.emu.requests.length).toBe(sentBefore);
      expect(sentBefore - before).toBeLessThanOrEqual(1); // at most the racing call reached the vendor
    } finally {
      hold.restore();
    }
  });
});
