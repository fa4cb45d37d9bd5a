import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/common/canonical-json.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { eventsOf, expectProblem, withoutCorrelation } from './governance.helpers.js';

/** The example rule of API.md §2. */
const BIG_REFUNDS = {
  id: 'big-refunds',
  match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] },
  decision: 'require_expert_approval',
  riskLevel: 'high',
  reason: 'refunds over 100 need an expert',
};

const ALL_OPS = {
  id: 'every-op',
  match: {
    // Paths must be params of the actions matched (a misspelt one would never apply).
    toolName: 'shopify_refund.*',
    riskLevel: 'high',
    where: [
      { path: 'orderId', op: 'eq', value: '1' },
      { path: 'orderId', op: 'ne', value: '2' },
      { path: 'amount', op: 'gte', value: '1.5' },
      { path: 'amount', op: 'lt', value: 10 },
      { path: 'amount', op: 'lte', value: 10 },
      // An exists guard first: a refund that leaves currency out is in the order's currency, which the policy cannot see.
      { path: 'currency', op: 'exists' },
      { path: 'currency', op: 'in', value: ['USD', 'EUR'] },
      { path: 'note', op: 'exists', value: false },
    ],
  },
  decision: 'observe',
};

const BLOCK_NANGO_POSTS = { id: 'no-nango-writes', match: { toolName: 'nango_proxy.post' }, decision: 'block', reason: 'not yet' };

describe('policies (GET/PUT /v1/orgs/:orgId/policies)', () => {
  let t: TestApp;
  let org: string;
  let admin: { key: string; id: string };
  let ops: { key: string; id: string };
  const path = (): string => `/v1/orgs/${org}/policies`;

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Policy Co');
    admin = await createKey(t, org, 'admin');
    ops = await createKey(t, org, 'ops');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('starts with no rules at version 0', async () => {
    const res = await t.http.get(path()).set(bearer(admin.key));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ rules: [], version: 0, updatedAt: null });
  });

  it('saves valid rules in order, bumps the version and appends policy.changed with the actor', async () => {
    const rules = [BIG_REFUNDS, ALL_OPS, BLOCK_NANGO_POSTS];
    const put = await t.http.put(path()).set(bearer(admin.key)).send({ rules });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body).toEqual({ rules, version: 1, updatedAt: expect.any(String) });
    expect(new Date(put.body.updatedAt as string).toISOString()).toBe(put.body.updatedAt);

    const get = await t.http.get(path()).set(bearer(admin.key));
    expect(get.status).toBe(200);
    expect(get.body).toEqual(put.body);

    const again = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [BIG_REFUNDS] });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ rules: [BIG_REFUNDS], version: 2 });
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toMatchObject({ rules: [BIG_REFUNDS], version: 2 });

    const events = await eventsOf(t, org, 'policy.changed');
    expect(events).toHaveLength(2);
    for (const e of events) expect(e.actor).toEqual({ keyId: admin.id, role: 'admin', correlationId: expect.stringMatching(/^[0-9a-f-]{36}$/) }); // the request's, as echoed
    expect(events[0].metadata).toMatchObject({ version: 1, ruleCount: 3, ruleIds: ['big-refunds', 'every-op', 'no-nango-writes'] });
    expect(events[1].metadata).toMatchObject({ version: 2, ruleCount: 1, ruleIds: ['big-refunds'] });
    // Safe facts only: the rule bodies (values, reasons) stay out of the event.
    expect(JSON.stringify(events)).not.toContain('need an expert');
  });

  it('policy.changed records what the rules said: their digest, and each rule with its reason and eq/ne/in values as digests', async () => {
    const own = await createOrg(t, 'Policy Record Co');
    const ownAdmin = await createKey(t, own, 'admin');
    const weakened = { ...BIG_REFUNDS, decision: 'allow' };
    const put = async (rules: unknown[]) => {
      const res = await t.http.put(`/v1/orgs/${own}/policies`).set(bearer(ownAdmin.key)).send({ rules });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as { rules: unknown[] };
    };
    const stored = [await put([BIG_REFUNDS, ALL_OPS]), await put([weakened]), await put([BIG_REFUNDS])];
    const events = await eventsOf(t, own, 'policy.changed');
    expect(events).toHaveLength(3);
    const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
    // The digest of the rules as GET answers them (canonical JSON: keys sorted, no spaces): a kept copy is checked by it.
    events.forEach((e, i) => expect(e.metadata.rulesDigest).toBe(sha(canonicalJson(stored[i]!.rules))));
    const digestOf = (value: unknown) => sha(canonicalJson(value));
    expect(events[0].metadata.rules).toEqual([
      {
        id: 'big-refunds',
        match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] },
        decision: 'require_expert_approval',
        riskLevel: 'high',
        reasonDigest: sha(BIG_REFUNDS.reason),
      },
      {
        id: 'every-op',
        match: {
          toolName: 'shopify_refund.*',
          riskLevel: 'high',
          where: [
            { path: 'orderId', op: 'eq', valueDigest: digestOf('1') },
            { path: 'orderId', op: 'ne', valueDigest: digestOf('2') },
            { path: 'amount', op: 'gte', value: '1.5' },
            { path: 'amount', op: 'lt', value: 10 },
            { path: 'amount', op: 'lte', value: 10 },
            { path: 'currency', op: 'exists' },
            { path: 'currency', op: 'in', valueDigest: digestOf(['USD', 'EUR']) },
            { path: 'note', op: 'exists', value: false },
          ],
        },
        decision: 'observe',
      },
    ]);
    // The rule weakened to allow and made strict again: three events an auditor tells apart without the version.
    expect(events.map((e) => (e.metadata.rules as { decision: string }[])[0]!.decision)).toEqual(['require_expert_approval', 'allow', 'require_expert_approval']);
    expect(events[1].metadata.rulesDigest).not.toBe(events[2].metadata.rulesDigest);
    expect(events[0].metadata.rulesDigest).not.toBe(events[2].metadata.rulesDigest);
    // Personal text stays out: the reason and the eq/ne/in values are on the ledger as digests only.
    expect(JSON.stringify(events)).not.toContain('need an expert');
    expect(JSON.stringify(events)).not.toContain('EUR');
  });

  it('lets ops read the rules but not change them (403)', async () => {
    const read = await t.http.get(path()).set(bearer(ops.key));
    expect(read.status).toBe(200);
    expect(read.body.rules).toEqual([BIG_REFUNDS]);
    const write = await t.http.put(path()).set(bearer(ops.key)).send({ rules: [] });
    expectProblem(write, 403, 'FORBIDDEN');
    for (const role of ['agent', 'expert']) {
      const { key } = await createKey(t, org, role);
      expectProblem(await t.http.put(path()).set(bearer(key)).send({ rules: [] }), 403, 'FORBIDDEN');
      expectProblem(await t.http.get(path()).set(bearer(key)), 403, 'FORBIDDEN');
    }
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toMatchObject({ rules: [BIG_REFUNDS], version: 2 });
  });

  it("hides another org's policies: 404, the same as an org that does not exist", async () => {
    const other = await createOrg(t, 'Other Policy Co');
    const otherAdmin = await createKey(t, other, 'admin');
    const foreign = await t.http.get(path()).set(bearer(otherAdmin.key));
    expectProblem(foreign, 404, 'NOT_FOUND');
    const missing = await t.http.get(`/v1/orgs/${randomUUID()}/policies`).set(adminAuth);
    expectProblem(missing, 404, 'NOT_FOUND');
    expect(withoutCorrelation(foreign.body)).toEqual(withoutCorrelation(missing.body));
    expectProblem(await t.http.put(path()).set(bearer(otherAdmin.key)).send({ rules: [] }), 404, 'NOT_FOUND');
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toMatchObject({ rules: [BIG_REFUNDS], version: 2 });
  });

  describe('refuses a bad rule with 400 naming it (index and id), and keeps the saved rules', () => {
    let eventsBefore = 0;
    let saved: unknown;

    beforeAll(async () => {
      saved = (await t.http.get(path()).set(bearer(admin.key))).body;
      eventsBefore = (await eventsOf(t, org, 'policy.changed')).length;
    });

    const unchanged = async (): Promise<void> => {
      expect((await t.http.get(path()).set(bearer(admin.key))).body).toEqual(saved);
      expect(await eventsOf(t, org, 'policy.changed')).toHaveLength(eventsBefore);
    };

    const badSecondRule: [string, Record<string, unknown>, RegExp][] = [
      ['an unknown op', { id: 'bad-op', match: { where: [{ path: 'amount', op: 'between', value: [1, 2] }] }, decision: 'block' }, /where\[0\]\.op/],
      ['a missing decision', { id: 'no-decision', match: { toolName: 'kyc.get_status' } }, /decision/],
      ['an unknown decision', { id: 'bad-decision', decision: 'maybe' }, /decision/],
      ['a __proto__ path', { id: 'proto-path', match: { where: [{ path: '__proto__.polluted', op: 'eq', value: 1 }] }, decision: 'allow' }, /__proto__/],
      ['a constructor path', { id: 'ctor-path', match: { where: [{ path: 'a.constructor.prototype', op: 'exists' }] }, decision: 'allow' }, /constructor/],
      ['an unknown rule field', { id: 'extra-field', decision: 'allow', priority: 1 }, /priority/],
      ['an unknown match field', { id: 'extra-match', match: { tool: 'kyc.get_status' }, decision: 'allow' }, /match\."tool"/],
      ['an unknown condition field', { id: 'extra-cond', match: { where: [{ path: 'a', op: 'eq', value: 1, not: true }] }, decision: 'allow' }, /not/],
      ['a non-numeric value for gt', { id: 'gt-text', match: { where: [{ path: 'amount', op: 'gt', value: 'lots' }] }, decision: 'block' }, /value/],
      ['a non-array value for in', { id: 'in-scalar', match: { where: [{ path: 'amount', op: 'in', value: 5 }] }, decision: 'block' }, /value/],
      ['a missing value for eq', { id: 'eq-nothing', match: { where: [{ path: 'amount', op: 'eq' }] }, decision: 'block' }, /value/],
      ['a bad toolName', { id: 'bad-tool', match: { toolName: 'shopify refund' }, decision: 'block' }, /toolName/],
      // Never present in the call, so the block would never apply (a missing param equals nothing).
      [
        'a param the action does not take',
        { id: 'bad-param', match: { toolName: 'shopify_order.add_note', where: [{ path: 'orderID', op: 'eq', value: '450789469' }] }, decision: 'block' },
        /where\[0\]\.path "orderID" is not a param of shopify_order\.add_note/,
      ],
      ['a param no action of the tool takes', { id: 'bad-tool-param', match: { toolName: 'nango_proxy.*', where: [{ path: 'amount', op: 'gt', value: 1 }] }, decision: 'block' }, /"amount" is not a param of any nango_proxy action/],
      ['a param no catalog action takes', { id: 'bad-any-param', match: { where: [{ path: 'amout', op: 'gt', value: 1 }] }, decision: 'block' }, /"amout" is not a param of any catalog action/],
      ['a bad riskLevel', { id: 'bad-risk', decision: 'block', riskLevel: 'extreme' }, /riskLevel/],
    ];

    for (const [what, rule, mentions] of badSecondRule) {
      it(what, async () => {
        const res = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [BIG_REFUNDS, rule] });
        expectProblem(res, 400, 'VALIDATION_FAILED');
        const detail = res.body.detail as string;
        expect(detail).toContain('rules[1]');
        expect(detail).toContain(`"${String(rule.id)}"`);
        expect(detail).toMatch(mentions);
        expect(detail).not.toContain('rules[0]');
        await unchanged();
      });
    }

    it('a duplicate id, naming both rules', async () => {
      const res = await t.http
        .put(path())
        .set(bearer(admin.key))
        .send({ rules: [BIG_REFUNDS, BLOCK_NANGO_POSTS, { ...BIG_REFUNDS, decision: 'block' }] });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toContain('rules[2] ("big-refunds")');
      expect(res.body.detail).toMatch(/duplicate id.*rules\[0\]/);
      await unchanged();
    });

    it('a rule without a usable id, by index', async () => {
      const res = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [BIG_REFUNDS, { decision: 'allow' }, { id: 'has space', decision: 'allow' }] });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toMatch(/rules\[1\]: id must be/);
      expect(res.body.detail).toMatch(/rules\[2\]: id must be/);
      await unchanged();
    });

    it('a __proto__ key inside a rule, sent as raw JSON', async () => {
      const raw = `{"rules":[{"id":"proto-key","decision":"allow","__proto__":{"decision":"block"}}]}`;
      const res = await t.http.put(path()).set(bearer(admin.key)).set('Content-Type', 'application/json').send(raw);
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toContain('rules[0] ("proto-key")');
      expect(res.body.detail).toContain('__proto__');
      expect(({} as Record<string, unknown>).decision).toBeUndefined();
      await unchanged();
    });

    it('every bad rule at once, each named', async () => {
      const res = await t.http
        .put(path())
        .set(bearer(admin.key))
        .send({ rules: [{ id: 'first-bad', decision: 'nope' }, BIG_REFUNDS, { id: 'second-bad', decision: 'allow', match: { where: [{ path: 'x', op: 'like' }] } }] });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toContain('rules[0] ("first-bad")');
      expect(res.body.detail).toContain('rules[2] ("second-bad")');
      expect(res.body.errors).toHaveLength(2);
      await unchanged();
    });

    it('a token pasted as a where path, a toolName or a value is not repeated; the position is named, with the names that would do', async () => {
      const TOKEN = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ toolName: 'shopify_refund.create', where: [{ path: TOKEN, op: 'eq', value: 'x' }] }, /where\[0\]\.path \(not named here.*\) is not a param of shopify_refund\.create \(its params: amount, currency, note, orderId\)/],
        [{ toolName: `${TOKEN}.create` }, /match\.toolName \(not named here.*\) names no tool action of the catalog \(it has: .*shopify_refund\.create/],
        [{ toolName: `${TOKEN}.*` }, /match\.toolName \(not named here.*\) names no tool of the catalog \(it has: .*shopify_refund\.\*/],
        [{ toolName: 'shopify_refund.create', where: [{ path: 'orderId', op: 'in', value: ['12345', TOKEN] }] }, /where\[0\]\.value\[1\] can never match orderId: must match pattern/],
      ];
      for (const [match, mentions] of cases) {
        const res = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [{ id: 'pasted', match, decision: 'block' }] });
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail).toMatch(mentions);
        expect(JSON.stringify(res.body)).not.toContain(TOKEN);
      }
      await unchanged();
    });

    it('a body with extra top-level fields, or not of the shape {rules: [...]}', async () => {
      const extra = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [BIG_REFUNDS], enabled: true });
      expectProblem(extra, 400, 'VALIDATION_FAILED');
      expect(extra.body.detail).toContain('enabled');

      for (const body of [{}, { rules: 'big-refunds' }, { rules: { 0: BIG_REFUNDS } }, [BIG_REFUNDS], { rules: null }]) {
        const res = await t.http.put(path()).set(bearer(admin.key)).send(body);
        expectProblem(res, 400, 'VALIDATION_FAILED');
      }
      const empty = await t.http.put(path()).set(bearer(admin.key));
      expectProblem(empty, 400, 'VALIDATION_FAILED');
      await unchanged();
    });

    it('more rules than the limit', async () => {
      const rules = Array.from({ length: 201 }, (_, i) => ({ id: `r${i}`, decision: 'allow' }));
      const res = await t.http.put(path()).set(bearer(admin.key)).send({ rules });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toMatch(/at most 200/);
      await unchanged();
    });
  });

  it('accepts an empty list, which clears the rules', async () => {
    const res = await t.http.put(path()).set(bearer(admin.key)).send({ rules: [] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ rules: [], version: 3 });
    expect((await t.http.get(path()).set(bearer(ops.key))).body).toMatchObject({ rules: [], version: 3 });
  });
});
