import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { ApprovalsGaugeService } from '../../src/ops/approvals-gauge.service.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, microsAfterEpoch2026, type CallSeed } from './ledger-seed.js';

interface EventPage {
  items: { id: string; orgId: string; type: string; runId: string | null; createdAt: string; chainSeq: number | null; hash: string | null }[];
  nextCursor: string | null;
}

describe('ledger events, usage and metrics', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('GET /v1/ledger/events', () => {
    let org: string;
    let ops: string;
    let run: string;

    async function all(key: string, query: Record<string, string>, limit: number): Promise<EventPage['items']> {
      const out: EventPage['items'] = [];
      let cursor: string | null = null;
      do {
        const res: { status: number; body: unknown } = await t.http.get('/v1/ledger/events').query({ ...query, limit: String(limit), ...(cursor ? { cursor } : {}) }).set(bearer(key));
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        out.push(...(res.body as EventPage).items);
        cursor = (res.body as EventPage).nextCursor;
      } while (cursor);
      return out;
    }

    beforeAll(async () => {
      org = await createOrg(t, 'Events');
      ops = (await createKey(t, org, 'ops')).key;
      run = await insertRun(t.ds, org);
      const events = t.app.get(LedgerEventsService);
      // One statement: many events share a created_at, so the order must break ties on seq.
      await events.append(Array.from({ length: 30 }, (_, i) => ({ orgId: org, type: i % 3 ? 'tool_call.requested' : 'tool_call.succeeded', runId: i % 2 ? run : null, metadata: { i } })));
      await events.append([{ orgId: org, type: 'tool_call.requested', runId: run, metadata: { i: 30 } }]);
    });

    it('pages every event of the org newest first, exactly once', async () => {
      const db = (await t.ds.query(`SELECT id FROM runtime_ledger_events WHERE org_id = $1 ORDER BY created_at DESC, seq DESC`, [org])) as { id: string }[];
      const listed = await all(ops, {}, 4);
      expect(listed.map((e) => e.id)).toEqual(db.map((r) => r.id));
      expect(listed[0]).toMatchObject({ orgId: org, type: 'tool_call.requested', runId: run });
      expect(Object.keys(listed[0]).sort()).toEqual(['actor', 'chainSeq', 'createdAt', 'createdAtExact', 'hash', 'id', 'metadata', 'orgId', 'prevHash', 'runId', 'toolCallId', 'type']);
    });

    it('filters by run, type and time', async () => {
      const byRun = await all(ops, { runId: run }, 5);
      expect(byRun).toHaveLength(16);
      expect(byRun.every((e) => e.runId === run)).toBe(true);
      const byType = await all(ops, { type: 'tool_call.succeeded', runId: run }, 3);
      expect(byType.length).toBe(5);
      expect(byType.every((e) => e.type === 'tool_call.succeeded' && e.runId === run)).toBe(true);
      const future = await all(ops, { since: '2999-01-01T00:00:00Z' }, 5);
      expect(future).toEqual([]);
      const past = await all(ops, { until: '2000-01-01' }, 5);
      expect(past).toEqual([]);
    });

    it('binds cursors to org and filters, and validates the query', async () => {
      const res = await t.http.get('/v1/ledger/events').query({ limit: '2', type: 'tool_call.requested' }).set(bearer(ops));
      const cursor = (res.body as EventPage).nextCursor!;
      const other = (await createKey(t, await createOrg(t, 'Other events'), 'ops')).key;
      for (const [query, key] of [
        [{ type: 'tool_call.succeeded', cursor }, ops],
        [{ type: 'tool_call.requested', cursor }, other],
        [{ type: 'tool_call.requested', cursor: cursor.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')) }, ops],
      ] as [Record<string, string>, string][]) {
        const r = await t.http.get('/v1/ledger/events').query(query).set(bearer(key));
        expect(r.status).toBe(400);
        expect(r.body.code).toBe('VALIDATION_FAILED');
      }
      const calls = await t.http.get('/v1/tool-calls').query({ cursor }).set(bearer(ops));
      expect(calls.status).toBe(400);
      for (const query of [{ limit: '0' }, { limit: '201' }, { runId: 'x' }, { since: 'soon' }, { orgId: 'x' }]) {
        expect((await t.http.get('/v1/ledger/events').query(query).set(bearer(ops))).status, JSON.stringify(query)).toBe(400);
      }
      expect((await t.http.get('/v1/ledger/events').query({ orgId: randomUUID() }).set(bearer(ops))).status).toBe(404);
      // A misspelt type matched nothing (200, an empty page that reads as "nothing happened"): said instead.
      const misspelt = await t.http.get('/v1/ledger/events').query({ type: 'tool_call.requestd' }).set(bearer(ops));
      expect(misspelt.status).toBe(400);
      expect(misspelt.body.detail).toContain("type must be one of the ledger's event types: org.created, ");
      expect(misspelt.body.detail).toContain('tool_call.requested');
      const platform = await all((await createKey(t, null, 'ops')).key, { orgId: org, runId: run }, 50);
      expect(platform).toHaveLength(16);
    });
  });

  describe('GET /v1/orgs/:orgId/usage', () => {
    it('sums calls, outcomes and cost per tool and action, within [from, to)', async () => {
      const org = await createOrg(t, 'Usage');
      const run = await insertRun(t.ds, org);
      const tools = [['order_lookup', 'lookup'], ['shopify_refund', 'create'], ['amazon_query', 'get_order']];
      const statuses = ['succeeded', 'succeeded', 'failed', 'blocked', 'indeterminate', 'waiting_approval'];
      const seeds: CallSeed[] = Array.from({ length: 90 }, (_, i) => ({
        orgId: org,
        runId: run,
        toolName: tools[i % 3][0],
        action: tools[i % 3][1],
        status: statuses[i % statuses.length],
        costCents: i % 5,
        createdAt: microsAfterEpoch2026(i * 60_000_000), // one a minute from 2026-01-01T00:00Z
      }));
      await insertCalls(t.ds, seeds);
      const other = await createOrg(t, 'Usage other');
      await insertCalls(t.ds, [{ orgId: other, runId: await insertRun(t.ds, other), costCents: 1000 }]);

      const expected = (from?: string, to?: string) => {
        const inRange = seeds.filter((s) => (!from || s.createdAt! >= from) && (!to || s.createdAt! < to));
        return tools
          .map(([toolName, action]) => {
            const rows = inRange.filter((s) => s.toolName === toolName && s.action === action);
            return {
              toolName, action, calls: rows.length,
              succeeded: rows.filter((s) => s.status === 'succeeded').length,
              failed: rows.filter((s) => s.status === 'failed').length,
              blocked: rows.filter((s) => s.status === 'blocked').length,
              costCents: rows.reduce((n, s) => n + s.costCents!, 0),
            };
          })
          .filter((r) => r.calls > 0)
          .sort((a, b) => (a.toolName + a.action < b.toolName + b.action ? -1 : 1));
      };
      const ops = (await createKey(t, org, 'ops')).key;
      const all = await t.http.get(`/v1/orgs/${org}/usage`).set(bearer(ops));
      expect(all.status).toBe(200);
      expect(all.body).toEqual({ byTool: expected() });
      expect(all.body.byTool.reduce((n: number, r: { calls: number }) => n + r.calls, 0)).toBe(90);
      // The ledger itself agrees.
      const [db] = (await t.ds.query(`SELECT count(*)::int AS n, sum(cost_cents)::int AS cost FROM tool_calls WHERE org_id = $1`, [org])) as { n: number; cost: number }[];
      expect(all.body.byTool.reduce((n: number, r: { costCents: number }) => n + r.costCents, 0)).toBe(db.cost);

      const from = seeds[10].createdAt!;
      const to = seeds[40].createdAt!;
      const window = await t.http.get(`/v1/orgs/${org}/usage`).query({ from, to }).set(adminAuth);
      expect(window.body).toEqual({ byTool: expected(from, to) });
      expect(window.body.byTool.reduce((n: number, r: { calls: number }) => n + r.calls, 0)).toBe(30);
      const empty = await t.http.get(`/v1/orgs/${org}/usage`).query({ from: '2030-01-01' }).set(adminAuth);
      expect(empty.body).toEqual({ byTool: [] });

      expect((await t.http.get(`/v1/orgs/${org}/usage`).query({ from: 'last week' }).set(adminAuth)).status).toBe(400);
      expect((await t.http.get(`/v1/orgs/${org}/usage`).query({ to: '2026-13-01' }).set(adminAuth)).status).toBe(400);
      expect((await t.http.get(`/v1/orgs/${other}/usage`).set(bearer(ops))).status).toBe(404);
      expect((await t.http.get(`/v1/orgs/not-an-org/usage`).set(adminAuth)).status).toBe(404);
      expect((await t.http.get(`/v1/orgs/${org}/usage`).set(bearer((await createKey(t, org, 'agent')).key))).status).toBe(403);
    });
  });

  describe('/metrics', () => {
    it('exposes the ops metrics, with approvals_pending counted from the database', async () => {
      const org = await createOrg(t, 'Metrics');
      const run = await insertRun(t.ds, org);
      const calls = await insertCalls(t.ds, [0, 1, 2, 3, 4].map(() => ({ orgId: org, runId: run, status: 'waiting_approval' })));
      for (const [i, c] of calls.entries()) {
        // The fourth is past its expiry, not yet written down by the sweep: every read shows it expired, and so does the gauge.
        // The fifth waits on the customer, not on an expert: counted apart (kind="client"), not as the experts' queue.
        await t.ds.query(
          `INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, risk_level, reason,
                                          action_digest, expires_at)
           VALUES ($1, $2, $3, $4, $7, $5, 'shopify_refund', 'create', '{}', 'high', 'test', 'ab', now() + $6::interval)`,
          [randomUUID(), org, c.id, run, i === 2 ? 'approved' : 'pending', i === 3 ? '-1 minute' : '1 day', i === 4 ? 'client' : 'expert'],
        );
      }
      const [{ expert, client, overdue }] = (await t.ds.query(
        `SELECT count(*) FILTER (WHERE expires_at > now() AND kind = 'expert')::int AS expert, count(*) FILTER (WHERE expires_at > now() AND kind = 'client')::int AS client,
                count(*) FILTER (WHERE expires_at <= now())::int AS overdue
           FROM approval_requests WHERE status = 'pending'`,
      )) as { expert: number; client: number; overdue: number }[];
      expect(overdue).toBeGreaterThan(0);
      expect(client).toBeGreaterThan(0);
      expect(await t.app.get(ApprovalsGaugeService).refresh()).toBe(expert + client);
      const res = await t.http.get('/metrics');
      expect(res.status).toBe(200);
      for (const name of ['tool_calls_total', 'vendor_call_duration_seconds', 'vendor_circuit_breaker_open', 'approvals_pending', 'approvals_expired_total', 'ledger_write_duration_seconds']) {
        expect(res.text).toContain(`# TYPE ${name} `);
      }
      // Only breakers refusing calls are reported: the help says what the series count.
      expect(res.text).toMatch(/^# HELP vendor_circuit_breaker_open .*refusing calls now \(open within its cooldown, or half_open with its one probe out\), by vendor and state$/m);
      expect(res.text).toMatch(new RegExp(`^approvals_pending\\{kind="expert"\\} ${expert}$`, 'm'));
      expect(res.text).toMatch(new RegExp(`^approvals_pending\\{kind="client"\\} ${client}$`, 'm'));
    });

    it('counts the reconcile work list: tool_calls_indeterminate and the age of the oldest, from the database', async () => {
      const org = await createOrg(t, 'Unknown outcomes');
      const run = await insertRun(t.ds, org);
      const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
      // Two unknown outcomes (one an hour old, as the orphan sweep leaves them: no answer, no counter moved), one settled.
      const [, reconciled] = await insertCalls(t.ds, [
        { orgId: org, runId: run, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', createdAt: hourAgo },
        { orgId: org, runId: run, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' },
        { orgId: org, runId: run, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' },
      ]);
      await t.ds.query(`UPDATE tool_calls SET status = 'succeeded', error_code = NULL WHERE id = $1`, [reconciled.id]);
      const [{ n, oldest }] = (await t.ds.query(
        `SELECT count(*)::int AS n, min(created_at) AS oldest FROM tool_calls WHERE status = 'indeterminate'`,
      )) as { n: number; oldest: Date }[];
      expect(n).toBeGreaterThanOrEqual(2);
      const gauges = t.app.get(ApprovalsGaugeService);
      const set = await gauges.refreshIndeterminate();
      expect(set.count).toBe(n);
      const expectedAge = (Date.now() - oldest.getTime()) / 1000;
      expect(set.oldestSeconds).toBeGreaterThanOrEqual(3_590);
      expect(Math.abs(set.oldestSeconds - expectedAge)).toBeLessThan(60);
      const res = await t.http.get('/metrics');
      expect(res.text).toMatch(new RegExp(`^tool_calls_indeterminate ${n}$`, 'm'));
      expect(res.text).toMatch(new RegExp(`^tool_calls_indeterminate_oldest_seconds ${set.oldestSeconds}$`, 'm'));

      // This org's reconciled: they leave the count, and the hour-old one the age (other orgs' calls of this worker's
      // database, if any, remain: counted from the database, not from this test).
      await t.ds.query(`UPDATE tool_calls SET status = 'failed' WHERE status = 'indeterminate' AND org_id = $1`, [org]);
      const [rest] = (await t.ds.query(`SELECT count(*)::int AS n, min(created_at) AS oldest FROM tool_calls WHERE status = 'indeterminate'`)) as {
        n: number;
        oldest: Date | null;
      }[];
      expect(rest.n).toBe(n - 2);
      const after = await gauges.refreshIndeterminate();
      expect(after.count).toBe(rest.n);
      if (rest.oldest) expect(Math.abs(after.oldestSeconds - (Date.now() - rest.oldest.getTime()) / 1000)).toBeLessThan(60);
      else expect(after.oldestSeconds).toBe(0);
      expect((await t.http.get('/metrics')).text).toMatch(new RegExp(`^tool_calls_indeterminate ${rest.n}\n`, 'm'));
    });
  });
});
