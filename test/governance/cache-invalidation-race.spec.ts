import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import type { Principal } from '../../src/auth/principal.js';
import type { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { FeatureFlagEntity } from '../../src/orgs/feature-flag.entity.js';
import { FeatureFlagsService } from '../../src/orgs/feature-flags.service.js';
import type { ToolCatalogService } from '../../src/catalog/tool-catalog.service.js';
import { PoliciesService } from '../../src/policy/policies.service.js';
import { PolicyEntity } from '../../src/policy/policy.entity.js';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { IntegrationCredentialEntity } from '../../src/credentials/integration-credential.entity.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/** Every rule's toolName is known here: these tests are about the cache, not the catalog. */
const anyTool = { has: () => true, isTool: () => true } as unknown as ToolCatalogService;

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
 * Wraps `svc.ds` so the next `method` call on `entity`'s repository runs its
 * query at once (it sees the data as it is now) but answers only on release().
 */
function holdNextRead(svc: object, entity: EntityTarget<ObjectLiteral>, method: 'find' | 'findOne') {
  const holder = svc as { ds: DataSource };
  const real = holder.ds;
  const read = deferred();
  const gate = deferred();
  let armed = true;
  holder.ds = new Proxy(real, {
    get(target, prop) {
      if (prop === 'getRepository') {
        return (e: EntityTarget<ObjectLiteral>) => {
          const repo = target.getRepository(e);
          if (e !== entity || !armed) return repo;
          armed = false;
          return new Proxy(repo, {
            get(r, p) {
              if (p !== method) return Reflect.get(r, p, r) as unknown;
              return async (...args: unknown[]) => {
                const result = (await (r[method] as (...a: unknown[]) => Promise<unknown>)(...args)) as unknown;
                read.resolve();
                await gate.promise;
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
    /** resolves once the held read has its (soon stale) answer */
    read: read.promise,
    release: () => gate.resolve(),
    restore: () => {
      gate.resolve();
      holder.ds = real;
    },
  };
}

const within = <T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), ms))]);

describe('per-org caches vs. a read racing a PUT (services on a fake store)', () => {
  const admin: Principal = { keyId: '00000000-0000-4000-8000-0000000000aa', orgId: null, role: 'admin' };
  const events = { append: async () => undefined } as unknown as LedgerEventsService;

  /** A DataSource stand-in: reads snapshot the store when they begin; `hold()` makes the next read wait for release. */
  function fakeStore() {
    const flags = new Map<string, boolean>();
    let policy: { rules: unknown[]; version: number } | null = null;
    let held: { promise: Promise<void>; resolve(): void } | null = null;
    let reads = 0;
    const after = async <T>(snapshot: T): Promise<T> => {
      reads++;
      const gate = held;
      held = null;
      if (gate) await gate.promise;
      return snapshot;
    };
    const manager = {
      query: async (sql: string, params: unknown[]) => {
        if (sql.includes('INSERT INTO policies')) {
          policy = { rules: JSON.parse(params[1] as string) as unknown[], version: (policy?.version ?? 0) + 1 };
          return [{ version: policy.version }];
        }
        return [];
      },
      getRepository: () => ({
        findOne: async ({ where }: { where: { flag: string } }) => {
          const v = flags.get(where.flag);
          return v === undefined ? null : { enabled: v };
        },
        upsert: async (row: { flag: string; enabled: boolean }) => void flags.set(row.flag, row.enabled),
      }),
    };
    const ds = {
      getRepository: (e: unknown) =>
        e === FeatureFlagEntity
          ? { find: () => after([...flags].map(([flag, enabled]) => ({ flag, enabled }))) }
          : { findOne: () => after(policy ? { rules: structuredClone(policy.rules), version: policy.version, updatedAt: new Date() } : null) },
      transaction: async (work: (m: typeof manager) => Promise<unknown>) => work(manager),
    } as unknown as DataSource;
    return {
      ds,
      setFlag: (flag: string, enabled: boolean) => flags.set(flag, enabled),
      reads: () => reads,
      /** the next read snapshots now and answers on release() */
      hold: () => {
        const gate = deferred();
        held = gate;
        return gate;
      },
    };
  }

  const ORG = '00000000-0000-4000-8000-000000000001';
  const BLOCK_ALL = [{ id: 'stop', match: { toolName: 'order_lookup.*' }, decision: 'block', reason: 'incident' }];

  it('flags: a read that began before set() committed is not cached once set() returned', async () => {
    const store = fakeStore();
    store.setFlag('tool_calling_enabled', true);
    const svc = new FeatureFlagsService(store.ds, events);
    const gate = store.hold();
    const racing = svc.isEnabled(ORG, 'tool_calling_enabled'); // snapshot: enabled
    await svc.set(admin, ORG, 'tool_calling_enabled', false);
    gate.resolve();
    expect(await racing).toBe(true); // concurrent with the PUT: either answer is fine
    expect(await svc.isEnabled(ORG, 'tool_calling_enabled')).toBe(false);
  });

  it('flags: a caller arriving after set() returned does not join the read that began before it', async () => {
    const store = fakeStore();
    store.setFlag('tool_calling_enabled', true);
    const svc = new FeatureFlagsService(store.ds, events);
    const gate = store.hold();
    const racing = svc.isEnabled(ORG, 'tool_calling_enabled');
    await svc.set(admin, ORG, 'tool_calling_enabled', false);
    const after = svc.isEnabled(ORG, 'tool_calling_enabled'); // the stale read is still open
    expect(await within(after, 'a fresh flags read')).toBe(false);
    gate.resolve();
    await racing;
    expect(await svc.isEnabled(ORG, 'tool_calling_enabled')).toBe(false);
  });

  it('flags: concurrent hot-path misses share one read; the admin read goes to the store and its answer is not the cached flags', async () => {
    const store = fakeStore();
    const svc = new FeatureFlagsService(store.ds, events);
    expect(await Promise.all([svc.isEnabled(ORG, 'tool_calling_enabled'), svc.isEnabled(ORG, 'tool_calling_enabled')])).toEqual([false, false]);
    expect(store.reads()).toBe(1);
    const all = await svc.all(ORG);
    expect(store.reads()).toBe(2);
    all.tool_calling_enabled = true;
    expect(await svc.isEnabled(ORG, 'tool_calling_enabled')).toBe(false);
  });

  it('policies: a read that began before replace() committed is not cached once replace() returned', async () => {
    const store = fakeStore();
    const svc = new PoliciesService(store.ds, events, anyTool);
    const gate = store.hold();
    const racing = svc.rulesFor(ORG); // snapshot: no rules
    await svc.replace(admin, ORG, { rules: BLOCK_ALL });
    gate.resolve();
    expect((await racing).rules).toEqual([]);
    expect((await svc.rulesFor(ORG)).rules?.map((r) => r.id)).toEqual(['stop']);
  });

  it('policies: a caller arriving after replace() returned does not join the read that began before it', async () => {
    const store = fakeStore();
    const svc = new PoliciesService(store.ds, events, anyTool);
    const gate = store.hold();
    const racing = svc.rulesFor(ORG);
    await svc.replace(admin, ORG, { rules: BLOCK_ALL });
    const after = svc.rulesFor(ORG);
    expect((await within(after, 'a fresh rules read')).rules?.map((r) => r.id)).toEqual(['stop']);
    gate.resolve();
    await racing;
    expect((await svc.rulesFor(ORG)).rules?.map((r) => r.id)).toEqual(['stop']);
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
