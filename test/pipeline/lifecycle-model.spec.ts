import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Model-based test of one org's life (fast-check commands): random sequences of tool calls (reads, notes, refunds,
 * with and without an Idempotency-Key), replays, racing copies, batches, approvals decided, raced and expired, runs
 * ended, the kill switch, policies, permissions, credentials deleted and put back, an agent key revoked, answers lost
 * and reconciled, driven against the real gateway (two in-process replicas on one database, requests spread between
 * them; MODEL_REPLICA=0 for one), real PostgreSQL and the vendor emulator, each step compared with a small model of
 * API.md: status codes and call states, what reached the vendor and how often (a side effect at most once), replays
 * equal to the original; after each sequence the ledger, runs, approvals, usage and every call's events. It found that
 * credentials deleted through one replica were still used by another for a refund, that a deletion during a refund's
 * wait ended EXECUTION_ERROR instead of CREDENTIALS_NOT_FOUND, and that a revoked key got 404 instead of 401 on
 * another replica. MODEL_SEED, MODEL_RUNS, MODEL_LEN, MODEL_SHRINK=1 explore further.
 */
type Kind = 'read' | 'note' | 'refund';
type PolicyName = 'default' | 'blockRefund' | 'clientRefund' | 'allowAll' | 'noteExpert' | 'bigRefunds';
const RULES: Record<PolicyName, unknown[]> = {
  default: [],
  blockRefund: [{ id: 'r1', match: { toolName: 'shopify_refund.create' }, decision: 'block', reason: 'no refunds' }],
  clientRefund: [{ id: 'r2', match: { toolName: 'shopify_refund.create' }, decision: 'require_client_approval' }],
  allowAll: [{ id: 'r3', match: {}, decision: 'allow' }],
  bigRefunds: [
    { id: 'big', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 0.05 }] }, decision: 'require_expert_approval' },
    { id: 'small', match: { toolName: 'shopify_refund.*' }, decision: 'require_client_approval' },
  ],
  noteExpert: [{ id: 'r4', match: { toolName: 'shopify_order.add_note' }, decision: 'require_expert_approval' }],
};
const COST: Record<Kind, number> = { read: 1, note: 2, refund: 5 };
const TOOL_OF: Record<Kind, string> = { read: 'order_lookup.lookup', note: 'shopify_order.add_note', refund: 'shopify_refund.create' };
type Decision = 'allow' | 'expert' | 'client' | 'block';
function decide(p: PolicyName, k: Kind, amount?: unknown): Decision {
  if (p === 'allowAll') return 'allow';
  if (p === 'bigRefunds' && k === 'refund') return Number(amount) > 0.05 ? 'expert' : 'client';
  if (k === 'refund') return p === 'blockRefund' ? 'block' : p === 'clientRefund' ? 'client' : 'expert';
  if (k === 'note' && p === 'noteExpert') return 'expert';
  return 'allow';
}

interface MCall {
  run: number;
  use: { type: string; id: string; name: string; input: Record<string, unknown> };
  kind: Kind;
  key?: string; // explicit Idempotency-Key
  http: number;
  status: string | null;
  errorCode: string | null;
  toolCallId?: string;
  approval?: { id: string; kind: 'expert' | 'client'; digest: string; status: 'pending' | 'approved' | 'rejected' | 'expired' };
  body?: Record<string, unknown>; // last authoritative body
  reconciled?: boolean;
  /** charged its catalog cost or nothing, as the ledger says (see DecideRacingGovernance) */
  chargeEither?: true;
}
interface Model {
  flag: boolean;
  policy: PolicyName;
  creds: boolean;
  runs: { id: string; active: boolean; owner: string; manifest: Kind[] }[];
  perms: Kind[];
  cur: number;
  calls: MCall[];
  agentKey: string;
  revokedKeys: string[];
  log: string[];
}
interface Real {
  h: Harness;
  orgId: string;
  adminKey: string;
  expertKey: string;
  expert2Key: string;
}

let H: Harness;
let noteSeq = 0;
const useOf = (k: Kind) =>
  k === 'read'
    ? { type: 'tool_use', id: `toolu_${randomUUID()}`, name: 'order_lookup', input: { action: 'lookup', orderId: '12345' } }
    : k === 'note'
      ? { type: 'tool_use', id: `toolu_${randomUUID()}`, name: 'shopify_order', input: { action: 'add_note', orderId: '12345', note: `n${++noteSeq}` } }
      : { type: 'tool_use', id: `toolu_${randomUUID()}`, name: 'shopify_refund', input: { action: 'create', orderId: '12345', amount: ++noteSeq % 2 ? '0.01' : '0.10' } };

const shopify = () => H.emu.count({ vendor: 'shopify' });
const mutations = (re: RegExp) => H.emu.requests.filter((r) => r.vendor === 'shopify' && re.test(r.body) && r.applied).length;
const refundsMade = () => (H.emu.vendor('shopify') as unknown as { refundCount(o: string): number }).refundCount('12345');
const sideEffects = () => ({ notes: mutations(/mutation OrderNote/), refunds: refundsMade(), all: shopify() });
/**
 * After credentials are deleted or put: a read may use a replica's copy of them for up to 1 s (README; a write reads
 * them afresh). The model lets that time pass when the calls are spread over two replicas.
 */
const readsCatchUp = (): Promise<void> => (process.env.MODEL_REPLICA !== '0' ? new Promise((res) => setTimeout(res, 1_100)) : Promise.resolve());
const cmp = (what: string, m: Model, got: unknown, want: unknown) => {
  try {
    expect(got).toEqual(want);
  } catch (e) {
    throw new Error(`${what}: got ${JSON.stringify(got)} want ${JSON.stringify(want)}\nsteps:\n${m.log.join('\n')}`, { cause: e });
  }
};
const no5xx = (m: Model, res: { status: number; text: string }, what: string) => {
  if (res.status >= 500) throw new Error(`${what}: ${res.status} ${res.text}\nsteps:\n${m.log.join('\n')}`);
};

function expectedNew(m: Model, kind: Kind, amount?: unknown): { http: number; status: string | null; errorCode: string | null; executes: boolean; approval?: 'expert' | 'client' } {
  if (m.runs[m.cur].owner !== m.agentKey) return { http: 404, status: null, errorCode: 'RUN_NOT_FOUND', executes: false };
  if (!m.runs[m.cur].active) return { http: 409, status: null, errorCode: 'RUN_NOT_ACTIVE', executes: false };
  if (!m.flag) return { http: 403, status: 'blocked', errorCode: 'FEATURE_DISABLED', executes: false };
  if (!m.runs[m.cur].manifest.includes(kind)) return { http: 403, status: 'blocked', errorCode: 'NOT_IN_MANIFEST', executes: false };
  const d = decide(m.policy, kind, amount);
  if (d === 'block') return { http: 403, status: 'blocked', errorCode: 'POLICY_BLOCKED', executes: false };
  if (d === 'expert' || d === 'client') return { http: 202, status: 'waiting_approval', errorCode: null, executes: false, approval: d };
  return m.creds ? { http: 200, status: 'succeeded', errorCode: null, executes: true } : { http: 200, status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND', executes: false };
}

async function checkEffects(m: Model, before: ReturnType<typeof sideEffects>, want: { notes: number; refunds: number; any: boolean }, what: string) {
  await new Promise((r) => setTimeout(r, 20));
  const after = sideEffects();
  cmp(`${what}: vendor side effects`, m, { notes: after.notes - before.notes, refunds: after.refunds - before.refunds, any: after.all > before.all }, want);
}

class PostNew implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind, readonly explicitKey: boolean) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const use = useOf(this.kind);
    const amount = use.input.amount;
    const key = this.explicitKey ? `idem-${randomUUID()}` : undefined;
    m.log.push(`post ${this.kind}${key ? ' key' : ''} run=${m.cur} flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const exp = expectedNew(m, this.kind, amount);
    const before = sideEffects();
    let req = r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.agentKey));
    if (key) req = req.set('Idempotency-Key', key);
    const res = await req.send(use);
    no5xx(m, res, 'post');
    cmp('post status', m, [res.status, res.body.toolCallId ? res.body.status : null, res.body.toolCallId ? res.body.errorCode : res.body.code ?? null], [exp.http, exp.status, exp.errorCode]);
    await checkEffects(m, before, { notes: exp.executes && this.kind === 'note' ? 1 : 0, refunds: exp.executes && this.kind === 'refund' ? 1 : 0, any: exp.executes }, 'post');
    const c: MCall = { run: m.cur, use, kind: this.kind, key, http: exp.http, status: exp.status, errorCode: exp.errorCode, toolCallId: res.body.toolCallId, body: res.body };
    if (exp.approval) {
      const a = await r.h.t.http.get(`/v1/approvals?status=pending`).set(bearer(r.adminKey));
      const found = (a.body.items as { id: string; toolCallId: string; kind: string; actionDigest: string }[]).find((x) => x.toolCallId === c.toolCallId);
      cmp('approval kind', m, found?.kind, exp.approval);
      c.approval = { id: found!.id, kind: exp.approval, digest: found!.actionDigest, status: 'pending' };
    }
    m.calls.push(c);
  }
  toString = () => `PostNew(${this.kind},${this.explicitKey})`;
}

async function replayCheck(m: Model, r: Real, c: MCall, newUseId: boolean, what: string) {
  const use = newUseId ? { ...c.use, id: `toolu_${randomUUID()}` } : c.use;
  const before = sideEffects();
  let req = r.h.t.http.post(`/v1/runs/${m.runs[c.run].id}/tool-calls`).set(bearer(m.agentKey));
  if (c.key) req = req.set('Idempotency-Key', c.key);
  const res = await req.send(use);
  no5xx(m, res, what);
  await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, what);
  if (m.runs[c.run].owner !== m.agentKey) {
    cmp(`${what} (another key's run)`, m, [res.status, res.body.code], [404, 'RUN_NOT_FOUND']);
    return;
  }
  if (c.http === 409 || c.http === 404) {
    // never recorded: the run had ended; it still has
    cmp(`${what} (unrecorded)`, m, [res.status, res.body.code], [409, 'RUN_NOT_ACTIVE']);
    return;
  }
  cmp(`${what} status`, m, [res.status, res.body.status, res.body.errorCode, res.body.replayed, res.body.toolCallId], [c.http, c.status, c.errorCode, true, c.toolCallId]);
  cmp(`${what} tool_use_id`, m, res.body.toolResult?.tool_use_id, use.id);
  if (c.body && c.body.result !== undefined) cmp(`${what} result`, m, res.body.result, c.body.result);
  if (c.body && c.body.toolResult) cmp(`${what} content`, m, String(res.body.toolResult?.content).startsWith((c.body.toolResult as { content: string }).content), true);
}

class Replay implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number, readonly newUseId: boolean) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => (this.newUseId ? !!c.key : true));
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => (this.newUseId ? !!c.key : true));
    const c = pool[this.i % pool.length];
    m.log.push(`replay #${m.calls.indexOf(c)}${this.newUseId ? ' newUseId' : ''}`);
    await replayCheck(m, r, c, this.newUseId, 'replay');
  }
  toString = () => `Replay(${this.i},${this.newUseId})`;
}

class KeyReuse implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => !!c.key && c.http < 404 && m.runs[c.run].owner === m.agentKey);
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => !!c.key && c.http < 404 && m.runs[c.run].owner === m.agentKey);
    const c = pool[this.i % pool.length];
    m.log.push(`key-reuse #${m.calls.indexOf(c)}`);
    const before = sideEffects();
    const other = useOf(c.kind === 'read' ? 'note' : 'read');
    const res = await r.h.t.http.post(`/v1/runs/${m.runs[c.run].id}/tool-calls`).set(bearer(m.agentKey)).set('Idempotency-Key', c.key!).send(other);
    no5xx(m, res, 'key reuse');
    await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'key reuse');
    cmp('key reuse', m, [res.status, res.body.code], [422, 'IDEMPOTENCY_KEY_REUSED']);
  }
  toString = () => `KeyReuse(${this.i})`;
}

async function settle(m: Model, r: Real, c: MCall): Promise<Record<string, unknown>> {
  const res = await r.h.t.http.get(`/v1/tool-calls/${c.toolCallId}/result?waitMs=8000`).set(bearer(r.adminKey));
  no5xx(m, res, 'result');
  return res.body;
}

class Decide implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number, readonly approve: boolean, readonly race: 'none' | 'double' | 'end') {}
  check = (m: Readonly<Model>) => m.calls.some((c) => c.approval?.status === 'pending');
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => c.approval?.status === 'pending');
    const c = pool[this.i % pool.length];
    const a = c.approval!;
    m.log.push(`decide #${m.calls.indexOf(c)} ${this.approve ? 'approve' : 'reject'} (${a.kind}) race=${this.race} flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const key = a.kind === 'expert' ? r.expertKey : m.agentKey;
    const before = sideEffects();
    const send = (approve: boolean) =>
      r.h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(key)).send({ decision: approve ? 'approve' : 'reject', actionDigest: a.digest });
    let approved = this.approve;
    if (this.race === 'none') {
      const res = await send(this.approve);
      no5xx(m, res, 'decide');
      cmp('decide', m, [res.status, res.body.status], [200, this.approve ? 'approved' : 'rejected']);
    } else if (this.race === 'double') {
      const [x, y] = await Promise.all([send(true), send(false)]);
      no5xx(m, x, 'decide race');
      no5xx(m, y, 'decide race');
      cmp('decide race statuses', m, [x.status, y.status].sort(), [200, 409]);
      approved = x.status === 200;
    } else {
      const run = m.runs[c.run];
      const [x, y] = await Promise.all([send(this.approve), r.h.t.http.post(`/v1/runs/${run.id}/complete`).set(bearer(run.owner === m.agentKey ? m.agentKey : r.adminKey)).send({})]);
      no5xx(m, x, 'decide vs end');
      no5xx(m, y, 'decide vs end');
      cmp('end in race', m, y.status, 200);
      run.active = false;
      // every other pending approval of the run is rejected by the end
      for (const o of m.calls)
        if (o !== c && o.run === c.run && o.approval?.status === 'pending') {
          Object.assign(o, { http: 403, status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
          o.approval.status = 'rejected';
          o.body = await settle(m, r, o);
        }
      if (x.status === 409) {
        // the end went first
        a.status = 'rejected';
        Object.assign(c, { http: 403, status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
        const body = await settle(m, r, c);
        cmp('decide lost to end', m, [body.status, body.errorCode], ['blocked', 'RUN_NOT_ACTIVE']);
        await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'decide lost to end');
        c.body = body;
        return;
      }
      cmp('decide vs end decision', m, x.status, 200);
    }
    a.status = approved ? 'approved' : 'rejected';
    const body = await settle(m, r, c);
    let want: [string, string | null, number];
    let executes = false;
    if (!approved) want = ['blocked', a.kind === 'expert' ? 'EXPERT_REJECTED' : 'CLIENT_REJECTED', 403];
    else if (!m.flag) want = ['blocked', 'FEATURE_DISABLED', 403];
    else {
      const d = decide(m.policy, c.kind, c.use.input.amount);
      if (d === 'block' || (d === 'expert' && a.kind === 'client')) want = ['blocked', 'POLICY_BLOCKED', 403];
      else if (!m.creds) want = ['failed', 'CREDENTIALS_NOT_FOUND', 200];
      else {
        want = ['succeeded', null, 200];
        executes = true;
      }
    }
    if (this.race === 'end' && approved) {
      // approved just before the end: the run ended while it was approved; accept either that it ran or that the end stopped it
      if (body.status === 'blocked' && body.errorCode === 'RUN_NOT_ACTIVE') {
        want = ['blocked', 'RUN_NOT_ACTIVE', 403];
        executes = false;
      }
    }
    cmp('settled', m, [body.status, body.errorCode ?? null], [want[0], want[1]]);
    c.status = want[0];
    c.errorCode = want[1];
    c.http = want[2];
    c.body = body;
    await checkEffects(m, before, { notes: executes && c.kind === 'note' ? 1 : 0, refunds: executes && c.kind === 'refund' ? 1 : 0, any: executes }, 'decide');
    // a second decision is refused
    const again = await send(!approved);
    cmp('second decision', m, again.status, 409);
  }
  toString = () => `Decide(${this.i},${this.approve},${this.race})`;
}

class EndRun implements fc.AsyncCommand<Model, Real> {
  constructor(readonly how: 'complete' | 'cancel') {}
  check = (m: Readonly<Model>) => m.runs[m.cur].active;
  async run(m: Model, r: Real) {
    m.log.push(`end ${this.how} run=${m.cur}`);
    const run = m.runs[m.cur];
    const res = await r.h.t.http.post(`/v1/runs/${run.id}/${this.how}`).set(bearer(run.owner === m.agentKey ? m.agentKey : r.adminKey)).send({});
    no5xx(m, res, 'end');
    cmp('end', m, [res.status, res.body.status, res.body.pendingApprovalCount], [200, this.how === 'complete' ? 'completed' : 'cancelled', 0]);
    run.active = false;
    for (const o of m.calls)
      if (o.run === m.cur && o.approval?.status === 'pending') {
        o.approval.status = 'rejected';
        Object.assign(o, { http: 403, status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
        o.body = await settle(m, r, o);
        cmp('ended pending', m, [o.body.status, o.body.errorCode], ['blocked', 'RUN_NOT_ACTIVE']);
      }
  }
  toString = () => `EndRun(${this.how})`;
}

class NewRun implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`new run`);
    const res = await r.h.t.http.post('/v1/runs').set(bearer(m.agentKey)).send({ specialistId: 'support' });
    no5xx(m, res, 'new run');
    cmp('new run', m, res.status, 201);
    m.runs.push({ id: res.body.id, active: true, owner: m.agentKey, manifest: [...m.perms] });
    cmp('manifest', m, [...res.body.manifest.allowedTools].sort(), m.perms.map((k) => TOOL_OF[k]).sort());
    m.cur = m.runs.length - 1;
  }
  toString = () => `NewRun`;
}

class SetFlag implements fc.AsyncCommand<Model, Real> {
  constructor(readonly on: boolean) {}
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`flag ${this.on}`);
    const res = await r.h.t.http.put(`/v1/orgs/${r.orgId}/feature-flags/tool_calling_enabled`).set(bearer(r.adminKey)).send({ enabled: this.on });
    no5xx(m, res, 'flag');
    cmp('flag', m, [res.status, res.body.enabled], [200, this.on]);
    m.flag = this.on;
  }
  toString = () => `SetFlag(${this.on})`;
}

class SetPolicy implements fc.AsyncCommand<Model, Real> {
  constructor(readonly p: PolicyName) {}
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`policy ${this.p}`);
    const res = await r.h.t.http.put(`/v1/orgs/${r.orgId}/policies`).set(bearer(r.adminKey)).send({ rules: RULES[this.p] });
    no5xx(m, res, 'policy');
    cmp(`policy ${this.p}: ${res.text}`, m, res.status, 200);
    m.policy = this.p;
  }
  toString = () => `SetPolicy(${this.p})`;
}

class Creds implements fc.AsyncCommand<Model, Real> {
  constructor(readonly op: 'delete' | 'put') {}
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`creds ${this.op}`);
    const path = `/v1/orgs/${r.orgId}/integrations/shopify/credentials`;
    const res =
      this.op === 'delete'
        ? await r.h.t.http.delete(path).set(bearer(r.adminKey))
        : await r.h.t.http.put(path).set(bearer(r.adminKey)).send({ config: { shopDomain: `org-${r.orgId.replace(/-/g, '')}.myshopify.com`, accessToken: SHOPIFY_TOKEN } });
    no5xx(m, res, 'creds');
    if (this.op === 'put') cmp('creds put', m, res.status, 200);
    else cmp('creds delete', m, m.creds ? res.status : [204, 404].includes(res.status) ? 'ok' : res.status, m.creds ? 204 : 'ok');
    m.creds = this.op === 'put';
    await readsCatchUp();
  }
  toString = () => `Creds(${this.op})`;
}

class RevokeAgentKey implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`revoke agent key`);
    const list = await r.h.t.http.get(`/v1/api-keys?orgId=${r.orgId}`).set(bearer(r.adminKey));
    const mine = (list.body.items as { id: string; role: string; revokedAt: string | null }[]).filter((k) => k.role === 'agent' && !k.revokedAt);
    cmp('one live agent key', m, mine.length, 1);
    const next = await createKey(r.h.t, r.orgId, 'agent');
    const del = await r.h.t.http.delete(`/v1/api-keys/${mine[0].id}`).set(bearer(r.adminKey));
    no5xx(m, del, 'revoke');
    cmp('revoke', m, del.status, 204);
    m.revokedKeys.push(m.agentKey);
    m.agentKey = next.key;
    const before = sideEffects();
    const res = await r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.revokedKeys.at(-1)!)).send(useOf('read'));
    // known (replica-revoked-key-404.spec.ts): another replica's cached key answers 404 for a run not its own
    cmp(`revoked key post ${res.text}`, m, res.status, 401);
    await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'revoked post');
  }
  toString = () => `RevokeAgentKey`;
}

class RaceReplays implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind, readonly n: number) {}
  check = (m: Readonly<Model>) => m.runs[m.cur].active && m.runs[m.cur].owner === m.agentKey;
  async run(m: Model, r: Real) {
    m.log.push(`race ${this.n} copies of a new ${this.kind} flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const use = useOf(this.kind);
    const exp = expectedNew(m, this.kind, use.input.amount);
    const before = sideEffects();
    const all = await Promise.all(Array.from({ length: this.n }, () => r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.agentKey)).send(use)));
    for (const res of all) no5xx(m, res, 'race');
    await checkEffects(m, before, { notes: exp.executes && this.kind === 'note' ? 1 : 0, refunds: exp.executes && this.kind === 'refund' ? 1 : 0, any: exp.executes }, 'race');
    const originals = all.filter((x) => x.body.replayed === false);
    cmp('race: one original', m, originals.length, 1);
    for (const res of all) {
      if (res.status === 409 && res.body.code === 'IDEMPOTENCY_IN_PROGRESS') continue;
      cmp('race answer', m, [res.status, res.body.status, res.body.errorCode, res.body.toolCallId], [exp.http, exp.status, exp.errorCode, originals[0].body.toolCallId]);
    }
    const o = originals[0];
    const c: MCall = { run: m.cur, use, kind: this.kind, http: exp.http, status: exp.status, errorCode: exp.errorCode, toolCallId: o.body.toolCallId, body: o.body };
    if (exp.approval) {
      const a = await r.h.t.http.get(`/v1/approvals?status=pending`).set(bearer(r.adminKey));
      const found = (a.body.items as { id: string; toolCallId: string; kind: string; actionDigest: string }[]).find((x) => x.toolCallId === c.toolCallId);
      cmp('race approval', m, found?.kind, exp.approval);
      c.approval = { id: found!.id, kind: exp.approval, digest: found!.actionDigest, status: 'pending' };
    }
    m.calls.push(c);
  }
  toString = () => `RaceReplays(${this.kind},${this.n})`;
}


class SetPerms implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kinds: Kind[]) {}
  check = () => true;
  async run(m: Model, r: Real) {
    m.log.push(`perms ${this.kinds.join(',')}`);
    const all: Kind[] = ['read', 'note', 'refund'];
    const items = all.map((k) => {
      const [toolName, action] = TOOL_OF[k].split('.');
      return { toolName, action, specialistId: null, enabled: this.kinds.includes(k) };
    });
    const res = await r.h.t.http.put(`/v1/orgs/${r.orgId}/tool-permissions`).set(bearer(r.adminKey)).send({ items });
    no5xx(m, res, 'perms');
    cmp('perms', m, res.status, 200);
    m.perms = [...this.kinds];
  }
  toString = () => `SetPerms(${this.kinds.join(',')})`;
}

/** A batch of new uses and re-sent earlier ones (of the current run), checked item by item like singles. */
class Batch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly items: ({ kind: Kind } | { again: number })[]) {}
  check = (m: Readonly<Model>) => m.runs[m.cur].active && m.runs[m.cur].owner === m.agentKey;
  async run(m: Model, r: Real) {
    const earlier = m.calls.filter((c) => c.run === m.cur && !c.key && c.http < 404);
    const plan: { use: MCall['use']; fresh?: Kind; old?: MCall }[] = [];
    for (const it of this.items) {
      if ('kind' in it) plan.push({ use: useOf(it.kind), fresh: it.kind });
      else if (earlier.length) {
        const old = earlier[it.again % earlier.length];
        if (!plan.some((p) => p.old === old)) plan.push({ use: old.use, old });
      }
    }
    if (!plan.length) return;
    m.log.push(`batch [${plan.map((p) => (p.fresh ? p.fresh : `again #${m.calls.indexOf(p.old!)}`)).join(', ')}] flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const before = sideEffects();
    const res = await r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls:batch`).set(bearer(m.agentKey)).send({ toolUses: plan.map((p) => p.use) });
    no5xx(m, res, 'batch');
    cmp('batch status', m, res.status, 200);
    const results = res.body.results as Record<string, unknown>[];
    let notes = 0;
    let heldWrites = false;
    let refunds = 0;
    let any = false;
    for (const [i, p] of plan.entries()) {
      const got = results[i];
      if (p.old) {
        const c = p.old;
        cmp(`batch item ${i} (again)`, m, [got.status, got.errorCode, got.replayed, got.toolCallId], [c.status, c.errorCode, true, c.toolCallId]);
        if (c.status === 'waiting_approval' && c.kind !== 'read') heldWrites = true;
        continue;
      }
      const exp = expectedNew(m, p.fresh!, p.use.input.amount);
      if (heldWrites && p.fresh !== 'read') {
        cmp(`batch item ${i} (held behind a waiting write)`, m, [got.status, got.code], [409, 'IDEMPOTENCY_IN_PROGRESS']);
        continue;
      }
      if (exp.approval && p.fresh !== 'read') heldWrites = true;
      cmp(`batch item ${i}`, m, [got.status, got.errorCode ?? null, got.replayed], [exp.status, exp.errorCode, false]);
      if (exp.executes) {
        any = true;
        if (p.fresh === 'note') notes++;
        if (p.fresh === 'refund') refunds++;
      }
      const c: MCall = { run: m.cur, use: p.use, kind: p.fresh!, http: exp.http, status: exp.status, errorCode: exp.errorCode, toolCallId: got.toolCallId as string | undefined, body: got };
      if (exp.approval) {
        const a = await r.h.t.http.get(`/v1/approvals?status=pending&limit=200`).set(bearer(r.adminKey));
        const found = (a.body.items as { id: string; toolCallId: string; kind: string; actionDigest: string }[]).find((x) => x.toolCallId === c.toolCallId);
        cmp('batch approval', m, found?.kind, exp.approval);
        c.approval = { id: found!.id, kind: exp.approval, digest: found!.actionDigest, status: 'pending' };
      }
      m.calls.push(c);
    }
    await checkEffects(m, before, { notes, refunds, any }, 'batch');
  }
  toString = () => `Batch(${JSON.stringify(this.items)})`;
}

/**
 * A decision racing a governance change (flag off, a block rule, credentials deleted) and copies of the call re-sent:
 * either order is allowed, but the outcome must be one of the two orders' and the vendor must have seen exactly what
 * the recorded outcome says (a refund at most once, none unless succeeded).
 */
class DecideRacingGovernance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number, readonly change: 'flagOff' | 'blockAll' | 'credsDelete', readonly resends: number) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => c.approval?.status === 'pending' && m.runs[c.run].owner === m.agentKey);
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => c.approval?.status === 'pending' && m.runs[c.run].owner === m.agentKey);
    const c = pool[this.i % pool.length];
    const a = c.approval!;
    m.log.push(`approve #${m.calls.indexOf(c)} (${a.kind}) racing ${this.change} + ${this.resends} resends flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const key = a.kind === 'expert' ? r.expertKey : m.agentKey;
    const before = sideEffects();
    const change =
      this.change === 'flagOff'
        ? r.h.t.http.put(`/v1/orgs/${r.orgId}/feature-flags/tool_calling_enabled`).set(bearer(r.adminKey)).send({ enabled: false })
        : this.change === 'blockAll'
          ? r.h.t.http.put(`/v1/orgs/${r.orgId}/policies`).set(bearer(r.adminKey)).send({ rules: [{ id: 'stop', match: {}, decision: 'block', reason: 'incident' }] })
          : r.h.t.http.delete(`/v1/orgs/${r.orgId}/integrations/shopify/credentials`).set(bearer(r.adminKey));
    const resends = Array.from({ length: this.resends }, () => r.h.t.http.post(`/v1/runs/${m.runs[c.run].id}/tool-calls`).set(bearer(m.agentKey)).send(c.use));
    const [d, g, ...rs] = await Promise.all([
      r.h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(key)).send({ decision: 'approve', actionDigest: a.digest }),
      change,
      ...resends,
    ]);
    no5xx(m, d, 'decision');
    no5xx(m, g, 'change');
    for (const x of rs) no5xx(m, x, 'resend');
    cmp('race decision', m, d.status, 200);
    cmp('race change', m, g.status < 300 || (this.change === 'credsDelete' && !m.creds), true);
    for (const x of rs) {
      const ok =
        (x.status === 202 && x.body.status === 'waiting_approval') ||
        (x.status === 409 && x.body.code === 'IDEMPOTENCY_IN_PROGRESS') ||
        (x.body.replayed === true && x.body.toolCallId === c.toolCallId);
      cmp(`resend answer ${x.status} ${x.body.status ?? x.body.code}`, m, ok, true);
    }
    a.status = 'approved';
    const old = { flag: m.flag, policy: m.policy, creds: m.creds };
    if (this.change === 'flagOff') m.flag = false;
    else if (this.change === 'blockAll') m.policy = 'blockAllX' as PolicyName;
    else m.creds = false;
    const body = await settle(m, r, c);
    if (this.change === 'credsDelete') await readsCatchUp();
    const outcomeUnder = (st: { flag: boolean; policy: string; creds: boolean }): string => {
      if (!st.flag) return 'blocked FEATURE_DISABLED';
      if (st.policy === 'blockAllX') return 'blocked POLICY_BLOCKED';
      const dd = decide(st.policy as PolicyName, c.kind, c.use.input.amount);
      if (dd === 'block' || (dd === 'expert' && a.kind === 'client')) return 'blocked POLICY_BLOCKED';
      if (!st.creds) return 'failed CREDENTIALS_NOT_FOUND';
      return 'succeeded null';
    };
    const got = `${body.status} ${body.errorCode ?? null}`;
    const allowed = [outcomeUnder(old), outcomeUnder({ flag: m.flag, policy: m.policy, creds: m.creds })];
    cmp(`race outcome ${got} in ${allowed.join(' | ')}`, m, allowed.includes(got), true);
    c.status = body.status as string;
    c.errorCode = (body.errorCode as string | null) ?? null;
    c.http = c.status === 'blocked' ? 403 : 200;
    c.body = body;
    // A refund whose credentials went while it ran may have read its order first: a call that reached the vendor is
    // charged (readSent), one stopped before is not.
    if (this.change === 'credsDelete' && c.kind === 'refund' && c.errorCode === 'CREDENTIALS_NOT_FOUND') c.chargeEither = true;
    const executes = c.status === 'succeeded';
    const after = sideEffects();
    // a refund reads its order before the lease: a read may have gone out even when the refund did not
    cmp('race effects', m, { notes: after.notes - before.notes, refunds: after.refunds - before.refunds, any: executes ? after.all > before.all : true }, {
      notes: executes && c.kind === 'note' ? 1 : 0,
      refunds: executes && c.kind === 'refund' ? 1 : 0,
      any: true,
    });
    // after the settle, a re-send answers the settled outcome
    await replayCheck(m, r, c, false, 'replay after race');
    // put the governance back to a known model state
    if (this.change === 'blockAll') {
      const res = await r.h.t.http.put(`/v1/orgs/${r.orgId}/policies`).set(bearer(r.adminKey)).send({ rules: RULES[old.policy] });
      cmp('policy restore', m, res.status, 200);
      m.policy = old.policy;
    }
  }
  toString = () => `DecideRacingGovernance(${this.i},${this.change},${this.resends})`;
}

/** The model's cost of a call: the catalog cost when it succeeded; a call that reached the vendor with no known answer (indeterminate, or reconciled) is charged the catalog cost too (reconcile.spec.ts). */
async function costOf(_m: Model, r: Real, c: MCall): Promise<number> {
  if (c.reconciled || c.status === 'indeterminate') return COST[c.kind];
  if (c.chargeEither) {
    const [{ cost_cents }] = (await r.h.t.ds.query('SELECT cost_cents FROM tool_calls WHERE id = $1', [c.toolCallId])) as { cost_cents: number }[];
    return cost_cents === 0 || cost_cents === COST[c.kind] ? cost_cents : -1;
  }
  return c.status === 'succeeded' ? COST[c.kind] : 0;
}

async function checkUsageAndApprovals(m: Model, r: Real) {
  const u = await r.h.t.http.get(`/v1/orgs/${r.orgId}/usage`).set(bearer(r.adminKey));
  cmp('usage status', m, u.status, 200);
  const got: Record<string, unknown> = {};
  for (const b of u.body.byTool as { toolName: string; action: string; calls: number; succeeded: number; failed: number; blocked: number }[])
    got[`${b.toolName}.${b.action}`] = [b.calls, b.succeeded, b.failed, b.blocked];
  const want: Record<string, number[]> = {};
  for (const c of m.calls) {
    if (c.http >= 404) continue;
    const k = TOOL_OF[c.kind];
    want[k] ??= [0, 0, 0, 0];
    want[k][0]++;
    if (c.status === 'succeeded') want[k][1]++;
    if (c.status === 'failed') want[k][2]++;
    if (c.status === 'blocked') want[k][3]++;
  }
  cmp('usage', m, got, want);
  const cost: Record<string, number> = {};
  for (const b of u.body.byTool as { toolName: string; action: string; costCents: number }[]) cost[`${b.toolName}.${b.action}`] = b.costCents;
  const wantCost: Record<string, number> = {};
  for (const c of m.calls) if (c.http < 404) wantCost[TOOL_OF[c.kind]] = (wantCost[TOOL_OF[c.kind]] ?? 0) + (await costOf(m, r, c));
  cmp('usage cost', m, cost, wantCost);
  // the agent sees the org's pending client approvals; each approval status filter agrees with the model
  const ag = await r.h.t.http.get(`/v1/approvals?status=pending&limit=200`).set(bearer(m.agentKey));
  cmp('agent pending list', m, (ag.body.items as { id: string }[]).map((a) => a.id).sort(), m.calls.filter((c) => c.approval?.status === 'pending' && c.approval.kind === 'client').map((c) => c.approval!.id).sort());
  for (const st of ['approved', 'rejected', 'expired']) {
    const l = await r.h.t.http.get(`/v1/approvals?status=${st}&limit=200`).set(bearer(r.adminKey));
    cmp(`approvals status=${st} ${l.status}`, m, (l.body.items as { id: string }[] | undefined)?.map((a) => a.id).sort(), m.calls.filter((c) => c.approval?.status === st).map((c) => c.approval!.id).sort());
  }
  for (const c of m.calls) {
    if (!c.approval) continue;
    const a = await r.h.t.http.get(`/v1/approvals/${c.approval.id}`).set(bearer(r.adminKey));
    cmp('approval view', m, [a.status, a.body.status, a.body.toolCallId], [200, c.approval.status, c.toolCallId]);
    const story = await r.h.t.http.get(`/v1/tool-calls/${c.toolCallId}`).set(bearer(r.adminKey));
    cmp('story', m, [story.status, story.body.status, story.body.approval?.status], [200, c.status, c.approval.status]);
  }
}


class Expire implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number, readonly via: 'result' | 'decision' | 'repost' | 'run' | 'list') {}
  check = (m: Readonly<Model>) => m.calls.some((c) => c.approval?.status === 'pending');
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => c.approval?.status === 'pending');
    const c = pool[this.i % pool.length];
    const a = c.approval!;
    m.log.push(`expire #${m.calls.indexOf(c)} seen via ${this.via}`);
    await r.h.t.ds.query(`UPDATE approval_requests SET expires_at = now() - interval '1 second' WHERE id = $1`, [a.id]);
    a.status = 'expired';
    Object.assign(c, { http: 403, status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
    const before = sideEffects();
    if (this.via === 'decision') {
      const key = a.kind === 'expert' ? r.expertKey : m.agentKey;
      const d = await r.h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(key)).send({ decision: 'approve', actionDigest: a.digest });
      no5xx(m, d, 'decide expired');
      cmp('decide expired', m, d.status, 409);
    } else if (this.via === 'repost' && m.runs[c.run].owner === m.agentKey) {
      const res = await r.h.t.http.post(`/v1/runs/${m.runs[c.run].id}/tool-calls`).set(bearer(m.agentKey)).send(c.use);
      no5xx(m, res, 'repost expired');
      cmp('repost expired', m, [res.status, res.body.status, res.body.errorCode, res.body.replayed], [403, 'blocked', 'APPROVAL_EXPIRED', true]);
    } else if (this.via === 'run') {
      const rr = await r.h.t.http.get(`/v1/runs/${m.runs[c.run].id}`).set(bearer(r.adminKey));
      const pending = m.calls.filter((o) => o.run === c.run && o.approval?.status === 'pending').length;
      cmp('run after expiry', m, rr.body.pendingApprovalCount, pending);
    } else if (this.via === 'list') {
      const ap = await r.h.t.http.get(`/v1/approvals?status=pending&limit=200`).set(bearer(r.adminKey));
      cmp('pending list after expiry', m, (ap.body.items as { id: string }[]).some((x) => x.id === a.id), false);
    }
    const body = await settle(m, r, c);
    cmp('expired call', m, [body.status, body.errorCode], ['blocked', 'APPROVAL_EXPIRED']);
    c.body = body;
    await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'expire');
  }
  toString = () => `Expire(${this.i},${this.via})`;
}


/** The same tool_use re-sent under another explicit key (or an explicit-key call re-sent with none): its run's tool_use id names it. */
class ReplayOtherKey implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => c.http < 404 && m.runs[c.run].owner === m.agentKey);
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => c.http < 404 && m.runs[c.run].owner === m.agentKey);
    const c = pool[this.i % pool.length];
    m.log.push(`replay #${m.calls.indexOf(c)} under ${c.key ? 'no key' : 'a new key'}`);
    const before = sideEffects();
    let req = r.h.t.http.post(`/v1/runs/${m.runs[c.run].id}/tool-calls`).set(bearer(m.agentKey));
    if (!c.key) req = req.set('Idempotency-Key', `other-${randomUUID()}`);
    const res = await req.send(c.use);
    no5xx(m, res, 'replay other key');
    await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'replay other key');
    cmp('replay other key', m, [res.status, res.body.status, res.body.errorCode, res.body.replayed, res.body.toolCallId], [c.http, c.status, c.errorCode, true, c.toolCallId]);
  }
  toString = () => `ReplayOtherKey(${this.i})`;
}

/** ARCHITECTURE §3: same key + same digest → the stored outcome; the digest is of {toolName, action, params}, not the run. */
class SameKeyOtherRun implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => !!c.key && c.http < 404 && c.run !== m.cur) && m.runs[m.cur].active && m.runs[m.cur].owner === m.agentKey;
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => !!c.key && c.http < 404 && c.run !== m.cur);
    const c = pool[this.i % pool.length];
    m.log.push(`same key as #${m.calls.indexOf(c)} in run ${m.cur}`);
    const before = sideEffects();
    const res = await r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.agentKey)).set('Idempotency-Key', c.key!).send({ ...c.use, id: `toolu_${randomUUID()}` });
    no5xx(m, res, 'same key other run');
    await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'same key other run');
    // An explicit key is the org's, not the run's: another run's call under it is refused, nothing recorded (OpenAPI).
    cmp('same key other run', m, [res.status, res.body.code], [422, 'IDEMPOTENCY_KEY_REUSED']);
  }
  toString = () => `SameKeyOtherRun(${this.i})`;
}

/** Two or three different tool_use ids under one explicit key, same action, at once: one call, the vendor once. */
class RaceSameKey implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind, readonly n: number) {}
  check = (m: Readonly<Model>) => m.runs[m.cur].active && m.runs[m.cur].owner === m.agentKey;
  async run(m: Model, r: Real) {
    const use = useOf(this.kind);
    const key = `race-${randomUUID()}`;
    m.log.push(`race ${this.n} tool_use ids under one key, new ${this.kind} flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const exp = expectedNew(m, this.kind, use.input.amount);
    const before = sideEffects();
    const uses = Array.from({ length: this.n }, () => ({ ...use, id: `toolu_${randomUUID()}` }));
    const all = await Promise.all(uses.map((u) => r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.agentKey)).set('Idempotency-Key', key).send(u)));
    for (const res of all) no5xx(m, res, 'race same key');
    await checkEffects(m, before, { notes: exp.executes && this.kind === 'note' ? 1 : 0, refunds: exp.executes && this.kind === 'refund' ? 1 : 0, any: exp.executes }, 'race same key');
    const originals = all.filter((x) => x.body.replayed === false);
    cmp('race same key: one original', m, originals.length, 1);
    for (const [i, res] of all.entries()) {
      if (res.status === 409 && res.body.code === 'IDEMPOTENCY_IN_PROGRESS') continue;
      cmp('race same key answer', m, [res.status, res.body.status, res.body.errorCode, res.body.toolCallId, res.body.toolResult?.tool_use_id], [exp.http, exp.status, exp.errorCode, originals[0].body.toolCallId, uses[i].id]);
    }
    const o = originals[0];
    const c: MCall = { run: m.cur, use: uses[all.indexOf(o)], key, kind: this.kind, http: exp.http, status: exp.status, errorCode: exp.errorCode, toolCallId: o.body.toolCallId, body: o.body };
    if (exp.approval) {
      const a = await r.h.t.http.get(`/v1/approvals?status=pending&limit=200`).set(bearer(r.adminKey));
      const found = (a.body.items as { id: string; toolCallId: string; kind: string; actionDigest: string }[]).find((x) => x.toolCallId === c.toolCallId);
      cmp('race same key approval', m, found?.kind, exp.approval);
      c.approval = { id: found!.id, kind: exp.approval, digest: found!.actionDigest, status: 'pending' };
    }
    m.calls.push(c);
  }
  toString = () => `RaceSameKey(${this.kind},${this.n})`;
}

/** Two approvals of one expert approval at once (two experts): one 200, one 409, the vendor once. */
class DoubleApprove implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => c.approval?.status === 'pending' && c.approval.kind === 'expert');
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => c.approval?.status === 'pending' && c.approval.kind === 'expert');
    const c = pool[this.i % pool.length];
    const a = c.approval!;
    m.log.push(`double approve #${m.calls.indexOf(c)} flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const before = sideEffects();
    const [x, y] = await Promise.all([r.expertKey, r.expert2Key].map((k) => r.h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(k)).send({ decision: 'approve', actionDigest: a.digest })));
    no5xx(m, x, 'double approve');
    no5xx(m, y, 'double approve');
    cmp('double approve', m, [x.status, y.status].sort(), [200, 409]);
    a.status = 'approved';
    const body = await settle(m, r, c);
    let want = 'succeeded null';
    if (!m.flag) want = 'blocked FEATURE_DISABLED';
    else if (decide(m.policy, c.kind, c.use.input.amount) === 'block') want = 'blocked POLICY_BLOCKED';
    else if (!m.creds) want = 'failed CREDENTIALS_NOT_FOUND';
    cmp('double approve outcome', m, `${body.status} ${body.errorCode ?? null}`, want);
    c.status = body.status as string;
    c.errorCode = (body.errorCode as string | null) ?? null;
    c.http = c.status === 'blocked' ? 403 : 200;
    c.body = body;
    const ex = c.status === 'succeeded';
    await checkEffects(m, before, { notes: ex && c.kind === 'note' ? 1 : 0, refunds: ex && c.kind === 'refund' ? 1 : 0, any: ex }, 'double approve');
  }
  toString = () => `DoubleApprove(${this.i})`;
}

/** A new call and the run's end at once: either the call is refused 409 (nothing recorded), or it was recorded first (and, if it waited, the end blocked it). */
class PostRacingEnd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind) {}
  check = (m: Readonly<Model>) => m.runs[m.cur].active && m.runs[m.cur].owner === m.agentKey;
  async run(m: Model, r: Real) {
    const run = m.runs[m.cur];
    const use = useOf(this.kind);
    const exp = expectedNew(m, this.kind, use.input.amount);
    m.log.push(`post ${this.kind} racing end flag=${m.flag} policy=${m.policy} creds=${m.creds}`);
    const before = sideEffects();
    const [p, e] = await Promise.all([
      r.h.t.http.post(`/v1/runs/${run.id}/tool-calls`).set(bearer(m.agentKey)).send(use),
      r.h.t.http.post(`/v1/runs/${run.id}/complete`).set(bearer(m.agentKey)).send({}),
    ]);
    no5xx(m, p, 'post vs end');
    no5xx(m, e, 'post vs end');
    cmp('end', m, [e.status, e.body.status, e.body.pendingApprovalCount], [200, 'completed', 0]);
    for (const o of m.calls)
      if (o.run === m.cur && o.approval?.status === 'pending') {
        o.approval.status = 'rejected';
        Object.assign(o, { http: 403, status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
        o.body = await settle(m, r, o);
      }
    run.active = false;
    if (p.status === 409) {
      cmp('post vs end refused', m, p.body.code, 'RUN_NOT_ACTIVE');
      m.calls.push({ run: m.cur, use, kind: this.kind, http: 409, status: null, errorCode: 'RUN_NOT_ACTIVE' });
      await checkEffects(m, before, { notes: 0, refunds: 0, any: false }, 'post vs end');
      return;
    }
    cmp('post vs end recorded', m, [p.status, p.body.status, p.body.errorCode], [exp.http, exp.status, exp.errorCode]);
    const c: MCall = { run: m.cur, use, kind: this.kind, http: exp.http, status: exp.status, errorCode: exp.errorCode, toolCallId: p.body.toolCallId, body: p.body };
    if (exp.approval) {
      const body = await settle(m, r, c);
      cmp('waiting call after the end', m, [body.status, body.errorCode], ['blocked', 'RUN_NOT_ACTIVE']);
      Object.assign(c, { http: 403, status: 'blocked', errorCode: 'RUN_NOT_ACTIVE', body });
      const a = await r.h.t.ds.query('SELECT id, status, action_digest FROM approval_requests WHERE tool_call_id = $1', [c.toolCallId]);
      c.approval = { id: a[0].id, kind: exp.approval, digest: a[0].action_digest, status: 'rejected' };
    }
    m.calls.push(c);
    await checkEffects(m, before, { notes: exp.executes && this.kind === 'note' ? 1 : 0, refunds: exp.executes && this.kind === 'refund' ? 1 : 0, any: exp.executes }, 'post vs end');
  }
  toString = () => `PostRacingEnd(${this.kind})`;
}


async function checkLedgerShape(m: Model, r: Real) {
  const recorded = m.calls.filter((c) => c.http < 404);
  // keyset pages of 3 cover every row once, newest first
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 200; i++) {
    const q: Record<string, string> = { orgId: r.orgId, limit: '3' };
    if (cursor) q.cursor = cursor;
    const page = await r.h.t.http.get('/v1/tool-calls').query(q).set(bearer(r.adminKey));
    cmp(`page ${i} ${page.text.slice(0, 200)}`, m, page.status, 200);
    for (const it of page.body.items as { id: string }[]) seen.push(it.id);
    cursor = page.body.nextCursor;
    if (!cursor) break;
  }
  cmp('pages: no duplicates', m, new Set(seen).size, seen.length);
  cmp('pages: every row', m, [...seen].sort(), recorded.map((c) => c.toolCallId).sort());
  // status filters agree with the model
  for (const st of ['succeeded', 'failed', 'blocked', 'waiting_approval', 'indeterminate']) {
    const res = await r.h.t.http.get('/v1/tool-calls').query({ orgId: r.orgId, status: st, limit: '200' }).set(bearer(r.adminKey));
    cmp(`filter status=${st}`, m, (res.body.items as { id: string }[]).map((x) => x.id).sort(), recorded.filter((c) => c.status === st).map((c) => c.toolCallId).sort());
  }
  // events: requested first, one terminal event matching the status, nothing after it
  const rows = (await r.h.t.ds.query('SELECT tool_call_id, type FROM runtime_ledger_events WHERE org_id = $1 AND tool_call_id IS NOT NULL ORDER BY seq', [r.orgId])) as { tool_call_id: string; type: string }[];
  const byCall = new Map<string, string[]>();
  for (const e of rows) byCall.set(e.tool_call_id, [...(byCall.get(e.tool_call_id) ?? []), e.type]);
  for (const c of recorded) {
    const all = byCall.get(c.toolCallId!) ?? [];
    if (c.reconciled) cmp(`reconciled events of #${m.calls.indexOf(c)}`, m, all.filter((t) => t === 'tool_call.reconciled').length, 1);
    const types = all.filter((t) => t !== 'tool_call.reconciled');
    const terminal = types.filter((t) => ['tool_call.succeeded', 'tool_call.failed', 'tool_call.blocked', 'tool_call.indeterminate'].includes(t));
    cmp(`events of #${m.calls.indexOf(c)} ${JSON.stringify(types)}`, m, [types[0], terminal.length, terminal.length ? types.at(-1) === terminal[0] : true], [
      'tool_call.requested',
      c.status === 'waiting_approval' ? 0 : 1,
      true,
    ]);
    if (terminal.length) cmp(`terminal event of #${m.calls.indexOf(c)}`, m, terminal[0], `tool_call.${c.reconciled ? 'indeterminate' : c.status}`);
  }
}


/** A write whose answer is lost after the vendor applied it: indeterminate / OUTCOME_UNKNOWN, applied once, never re-sent. */
class LostAnswer implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: 'note' | 'refund') {}
  check = (m: Readonly<Model>) => {
    const run = m.runs[m.cur];
    return run.active && run.owner === m.agentKey && m.flag && m.creds && run.manifest.includes(this.kind) && decide(m.policy, this.kind, '0.01') === 'allow';
  };
  async run(m: Model, r: Real) {
    const use = useOf(this.kind);
    if (this.kind === 'refund') use.input.amount = '0.01';
    m.log.push(`lost answer ${this.kind} policy=${m.policy}`);
    const before = sideEffects();
    r.h.emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: this.kind === 'note' ? /mutation OrderNote/ : /mutation Refund/ });
    const res = await r.h.t.http.post(`/v1/runs/${m.runs[m.cur].id}/tool-calls`).set(bearer(m.agentKey)).send(use);
    r.h.emu.clearFaults();
    no5xx(m, res, 'lost answer');
    cmp('lost answer', m, [res.status, res.body.status, res.body.errorCode], [200, 'indeterminate', 'OUTCOME_UNKNOWN']);
    await checkEffects(m, before, { notes: this.kind === 'note' ? 1 : 0, refunds: this.kind === 'refund' ? 1 : 0, any: true }, 'lost answer');
    m.calls.push({ run: m.cur, use, kind: this.kind, http: 200, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolCallId: res.body.toolCallId, body: res.body });
    // Shopify may still be running a refund whose answer was lost, so it keeps the order's lease until the lease
    // expires (or the call is reconciled): later refunds of the order wait for it. The model lets that time pass.
    if (this.kind === 'refund') await r.h.t.ds.query(`DELETE FROM shopify_refund_leases WHERE org_id = $1 AND order_id = '12345'`, [r.orgId]);
  }
  toString = () => `LostAnswer(${this.kind})`;
}

class Reconcile implements fc.AsyncCommand<Model, Real> {
  constructor(readonly i: number, readonly to: 'succeeded' | 'failed', readonly wrong: boolean) {}
  check = (m: Readonly<Model>) => m.calls.some((c) => (this.wrong ? c.http < 404 && c.status !== 'indeterminate' : c.status === 'indeterminate'));
  async run(m: Model, r: Real) {
    const pool = m.calls.filter((c) => (this.wrong ? c.http < 404 && c.status !== 'indeterminate' : c.status === 'indeterminate'));
    const c = pool[this.i % pool.length];
    m.log.push(`reconcile #${m.calls.indexOf(c)} (${c.status}) → ${this.to}`);
    const res = await r.h.t.http.post(`/v1/tool-calls/${c.toolCallId}/reconcile`).set(bearer(r.adminKey)).send({ status: this.to, note: 'checked by hand' });
    no5xx(m, res, 'reconcile');
    if (this.wrong) {
      cmp('reconcile of a settled call', m, res.status, 409);
      return;
    }
    cmp('reconcile', m, [res.status, res.body.status], [200, this.to]);
    c.status = this.to;
    c.errorCode = this.to === 'failed' ? 'VENDOR_ERROR' : null;
    c.reconciled = true;
    const body = await settle(m, r, c);
    cmp('reconciled result', m, [body.status, body.errorCode ?? null], [c.status, c.errorCode]);
    c.body = body;
    if (m.runs[c.run].owner === m.agentKey) await replayCheck(m, r, c, false, 'replay after reconcile');
  }
  toString = () => `Reconcile(${this.i},${this.to},${this.wrong})`;
}

/** After every sequence: the ledger, the approvals and the runs as the model says. */
async function checkAll(m: Model, r: Real) {
  for (const [ri, run] of m.runs.entries()) {
    const list = await r.h.t.http.get(`/v1/tool-calls?runId=${run.id}&limit=200`).set(bearer(r.adminKey));
    cmp('ledger list', m, list.status, 200);
    const got = (list.body.items as { id: string; status: string; errorCode: string | null }[]).map((x) => `${x.id}:${x.status}:${x.errorCode}`).sort();
    const want = m.calls.filter((c) => c.run === ri && c.http < 404).map((c) => `${c.toolCallId}:${c.status}:${c.errorCode}`).sort();
    cmp(`ledger of run ${ri}`, m, got, want);
    const rr = await r.h.t.http.get(`/v1/runs/${run.id}`).set(bearer(r.adminKey));
    const pending = m.calls.filter((c) => c.run === ri && c.approval?.status === 'pending').length;
    let runCost = 0;
    for (const c of m.calls.filter((x) => x.run === ri && x.http < 404)) runCost += await costOf(m, r, c);
    cmp(`run ${ri} cost`, m, rr.body.totalCostCents, runCost);
    cmp(`run ${ri}`, m, [rr.body.status === 'completed' || rr.body.status === 'cancelled' ? 'ended' : rr.body.status, rr.body.pendingApprovalCount], [
      run.active ? (pending ? 'waiting_approval' : 'running') : 'ended',
      pending,
    ]);
  }
  const ap = await r.h.t.http.get(`/v1/approvals?status=pending&limit=200`).set(bearer(r.adminKey));
  cmp('pending approvals', m, (ap.body.items as { id: string }[]).map((a) => a.id).sort(), m.calls.filter((c) => c.approval?.status === 'pending').map((c) => c.approval!.id).sort());
  for (const c of m.calls) {
    if (c.http >= 404) continue;
    const res = await r.h.t.http.get(`/v1/tool-calls/${c.toolCallId}/result`).set(bearer(r.adminKey));
    cmp('result read', m, [res.status, res.body.status, res.body.errorCode], [200, c.status, c.errorCode]);
  }
  await checkUsageAndApprovals(m, r);
  await checkLedgerShape(m, r);
  const v = await r.h.t.http.get('/v1/ledger/verify').query({ orgId: r.orgId }).set(adminAuth);
  cmp('ledger verify', m, v.body.ok, true);
}

import { SHOPIFY_TOKEN } from '../support/secrets.js';

const kindArb = fc.constantFrom<Kind>('read', 'note', 'refund');
const postArb = kindArb.chain((k) => fc.boolean().map((b) => new PostNew(k, b)));
const replayArb = fc.tuple(fc.nat(20), fc.boolean()).map(([i, b]) => new Replay(i, b));
const decideArb = fc.tuple(fc.nat(20), fc.boolean(), fc.constantFrom<'none' | 'double' | 'end'>('none', 'none', 'none', 'double', 'end')).map(([i, a, race]) => new Decide(i, a, race));
const commands = [
  postArb, postArb, postArb, replayArb, replayArb, decideArb, decideArb, decideArb,
  fc.tuple(kindArb, fc.integer({ min: 2, max: 3 })).map(([k, n]) => new RaceReplays(k, n)),
  kindArb.chain((k) => fc.boolean().map((b) => new PostNew(k, b))),
  kindArb.map((k) => new PostNew(k, false)),
  fc.tuple(fc.nat(20), fc.boolean()).map(([i, b]) => new Replay(i, b)),
  fc.nat(20).map((i) => new KeyReuse(i)),
  fc.tuple(fc.nat(20), fc.boolean(), fc.constantFrom<'none' | 'double' | 'end'>('none', 'none', 'none', 'double', 'end')).map(([i, a, race]) => new Decide(i, a, race)),
  fc.tuple(fc.nat(20), fc.boolean()).map(([i, a]) => new Decide(i, a, 'none')),
  fc.constantFrom<'complete' | 'cancel'>('complete', 'cancel').map((h) => new EndRun(h)),
  fc.constant(new NewRun()),
  fc.constant(new NewRun()), // twice: after a run ends or the key is revoked, most commands wait for a new run
  fc.boolean().map((b) => new SetFlag(b)),
  fc.constantFrom<PolicyName>('default', 'blockRefund', 'clientRefund', 'allowAll', 'noteExpert', 'bigRefunds').map((p) => new SetPolicy(p)),
  fc.constantFrom<'delete' | 'put'>('delete', 'put').map((o) => new Creds(o)),
  fc.constant(new RevokeAgentKey()),
  fc.tuple(kindArb, fc.integer({ min: 2, max: 3 })).map(([k, n]) => new RaceReplays(k, n)),
  fc.subarray<Kind>(['read', 'note', 'refund']).map((ks) => new SetPerms(ks)),
  fc.nat(20).map((i) => new ReplayOtherKey(i)),
  fc.constantFrom<'note' | 'refund'>('note', 'refund').map((k) => new LostAnswer(k)),
  fc.constantFrom<'note' | 'refund'>('note', 'refund').map((k) => new LostAnswer(k)),
  fc.tuple(fc.nat(20), fc.constantFrom<'succeeded' | 'failed'>('succeeded', 'failed'), fc.boolean()).map(([i, t, w]) => new Reconcile(i, t, w)),
  fc.tuple(fc.nat(20), fc.constantFrom<'succeeded' | 'failed'>('succeeded', 'failed')).map(([i, t]) => new Reconcile(i, t, false)),
  fc.nat(20).map((i) => new SameKeyOtherRun(i)),
  fc.tuple(kindArb, fc.integer({ min: 2, max: 3 })).map(([k, n]) => new RaceSameKey(k, n)),
  fc.nat(20).map((i) => new DoubleApprove(i)),
  fc.nat(20).map((i) => new DoubleApprove(i)),
  kindArb.map((k) => new PostRacingEnd(k)),
  fc.tuple(fc.nat(20), fc.constantFrom<'result' | 'decision' | 'repost' | 'run' | 'list'>('result', 'decision', 'repost', 'run', 'list')).map(([i, v]) => new Expire(i, v)),
  fc.array(fc.oneof(kindArb.map((kind) => ({ kind })), fc.nat(20).map((again) => ({ again }))), { minLength: 1, maxLength: 4 }).map((xs) => new Batch(xs)),
  fc.array(fc.oneof(kindArb.map((kind) => ({ kind })), fc.nat(20).map((again) => ({ again }))), { minLength: 1, maxLength: 4 }).map((xs) => new Batch(xs)),
  fc.tuple(fc.nat(20), fc.constantFrom<'flagOff' | 'blockAll' | 'credsDelete'>('flagOff', 'blockAll', 'credsDelete'), fc.integer({ min: 0, max: 2 })).map(([i, c, n]) => new DecideRacingGovernance(i, c, n)),
  fc.tuple(fc.nat(20), fc.constantFrom<'flagOff' | 'blockAll' | 'credsDelete'>('flagOff', 'blockAll', 'credsDelete'), fc.integer({ min: 0, max: 2 })).map(([i, c, n]) => new DecideRacingGovernance(i, c, n)),
];

describe('model-based: one org driven through random sequences', () => {
  let replica: TestApp | undefined;
  beforeAll(async () => {
    H = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    if (process.env.MODEL_REPLICA !== '0') replica = await startTestApp({ ...emulatorEnv(H.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await replica?.close();
    await H?.close();
  });

  it('behaves like the model', async () => {
    const seed = Number(process.env.MODEL_SEED ?? 24);
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: Number(process.env.MODEL_LEN ?? 25), size: 'max' }), async (cmds) => {
        const org = await setupOrg(H.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note', 'shopify_refund.create'] });
        const expert = await createKey(H.t, org.orgId, 'expert');
        const m: Model = { flag: true, policy: 'default', creds: true, runs: [{ id: org.runId, active: true, owner: org.agentKey, manifest: ['read', 'note', 'refund'] }], perms: ['read', 'note', 'refund'], cur: 0, calls: [], agentKey: org.agentKey, revokedKeys: [], log: [] };
        const expert2 = await createKey(H.t, org.orgId, 'expert');
        const apps = replica ? [H.t, replica] : [H.t];
        let turn = 0;
        const both = { get http() { return apps[(turn++ * 7 + (turn >> 2)) % apps.length].http; }, ds: H.t.ds, app: H.t.app } as unknown as TestApp;
        const r: Real = { h: { t: both, emu: H.emu } as unknown as Harness, orgId: org.orgId, adminKey: org.adminKey, expertKey: expert.key, expert2Key: expert2.key };
        await fc.asyncModelRun(() => ({ model: m, real: r }), cmds);
        m.log.push('final check');
        await checkAll(m, r);
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 8), seed, endOnFailure: process.env.MODEL_SHRINK !== '1', verbose: 1 },
    );
  }, 600_000);
});
