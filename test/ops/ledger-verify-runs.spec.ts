import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import type { VerifyResult } from '../../src/ledger/ledger-verifier.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { toolUse } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Verify holds an org's runs to their run events (src/ledger/run-check.ts): the gateway acts on the agent_runs row —
 * its manifest says which tools the run's calls may use, its status whether a call is taken, its created_by which
 * agent key reaches it — and the row is not chained, so a write action added to a manifest, a cancelled run set running
 * again or a run handed to another key by an UPDATE left every chain intact and verify ok. Each test tampers with its
 * own org only (the database is shared).
 */
describe('ledger verify: runs against their events', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const verify = async (orgId: string): Promise<VerifyResult> => {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as VerifyResult;
  };
  const broken = async (orgId: string, reason: RegExp, eventId?: string | null): Promise<void> => {
    const result = await verify(orgId);
    expect(result.ok, JSON.stringify(result)).toBe(false);
    if (!result.ok) {
      expect(result.brokenAt.reason).toMatch(reason);
      if (eventId !== undefined) expect(result.brokenAt.eventId).toBe(eventId);
    }
  };
  const ok = (res: { status: number; body: unknown }): void => expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  const eventOf = async (runId: string, type: string): Promise<string> =>
    ((await t.ds.query('SELECT id FROM runtime_ledger_events WHERE run_id = $1 AND type = $2', [runId, type])) as [{ id: string }])[0].id;

  /**
   * An org whose runs the API made: a live one with a call in it (blocked: tool calling is off), one cancelled by an
   * admin with a reason, one completed by its agent with none. Its permissions allow a lookup, not a refund.
   */
  async function orgWithRuns(name: string) {
    const org = await createOrg(t, name);
    const admin = await createKey(t, org, 'admin');
    const agent = await createKey(t, org, 'agent');
    const other = await createKey(t, org, 'agent');
    const items = [
      { toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true },
      { toolName: 'shopify_refund', action: 'create', specialistId: null, enabled: false },
    ];
    ok(await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(bearer(admin.key)).send({ items }));
    const newRun = async (): Promise<string> => {
      const res = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'support' });
      ok(res);
      return (res.body as { id: string }).id;
    };
    const live = await newRun();
    const call = await t.http.post(`/v1/runs/${live}/tool-calls`).set(bearer(agent.key)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    expect(call.body.status, JSON.stringify(call.body)).toBe('blocked');
    const cancelled = await newRun();
    ok(await t.http.post(`/v1/runs/${cancelled}/cancel`).set(bearer(admin.key)).send({ reason: 'runaway agent' }));
    const completed = await newRun();
    ok(await t.http.post(`/v1/runs/${completed}/complete`).set(bearer(agent.key)).send({}));
    expect(await verify(org)).toMatchObject({ ok: true });
    return { org, admin, agent, other, live, cancelled, completed };
  }

  it('runs made, used and ended through the API verify intact, over the API and the CLI; their events record the manifest and the end reason by digest', async () => {
    const { org, live, cancelled } = await orgWithRuns('Runs Intact Co');
    const [created] = (await t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.created'`, [live])) as [{ metadata: Record<string, unknown> }];
    const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
    expect(created.metadata).toEqual({ specialistId: 'support', allowedToolCount: 1, manifestDigest: sha('["order_lookup.lookup"]') });
    const view = await t.http.get(`/v1/runs/${live}`).set(adminAuth);
    expect(sha(JSON.stringify(view.body.manifest.allowedTools))).toBe(created.metadata.manifestDigest); // recomputable from the API
    const [ended] = (await t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.cancelled'`, [cancelled])) as [{ metadata: unknown }];
    expect(ended.metadata).toEqual({ reasonGiven: true, reasonDigest: sha('runaway agent'), blockedCalls: 0 });
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(['--org', org], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code, err.join('\n')).toBe(0);
    expect(JSON.parse(out[0]!)).toMatchObject({ ok: true });
  });

  it('a manifest widened around the gateway is a break at its run.created event, and one put back verifies again', async () => {
    const { org, live, agent } = await orgWithRuns('Runs Manifest Co');
    await t.ds.query(
      `UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest,allowedTools}', metadata->'runtimeManifest'->'allowedTools' || '["shopify_refund.create"]') WHERE id = $1`,
      [live],
    );
    // What the edit does: the run's calls may now use the refund, which the org's permissions never enabled.
    expect((await t.http.get(`/v1/runs/${live}`).set(bearer(agent.key))).body.manifest.allowedTools).toContain('shopify_refund.create');
    await broken(org, new RegExp(`run ${live}: its manifest differs from the one its run.created event recorded \\(manifestDigest\\)`), await eventOf(live, 'run.created'));
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest,allowedTools}', '["order_lookup.lookup"]') WHERE id = $1`, [live]);
    expect(await verify(org)).toMatchObject({ ok: true });
    // Reordered is another manifest too (the digest is of the list as the run shows it); so is one of another shape.
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest}', '{"allowedTools": "order_lookup.lookup"}') WHERE id = $1`, [live]);
    await broken(org, /its manifest differs/);
  });

  it('status: a cancelled run set running again, a live one ended with no event, or an end of the other kind is a break', async () => {
    const { org, live, cancelled, completed } = await orgWithRuns('Runs Status Co');
    await t.ds.query(`UPDATE agent_runs SET status = 'running' WHERE id = $1`, [cancelled]);
    await broken(org, new RegExp(`run ${cancelled} is running, but run.cancelled on the ledger ended it`), await eventOf(cancelled, 'run.cancelled'));
    await t.ds.query(`UPDATE agent_runs SET status = 'cancelled' WHERE id = $1`, [cancelled]);
    expect(await verify(org)).toMatchObject({ ok: true });
    await t.ds.query(`UPDATE agent_runs SET status = 'cancelled' WHERE id = $1`, [completed]);
    await broken(org, new RegExp(`run ${completed} is cancelled, but its end event is run.completed`));
    await t.ds.query(`UPDATE agent_runs SET status = 'completed' WHERE id = $1`, [completed]);
    await t.ds.query(`UPDATE agent_runs SET status = 'completed' WHERE id = $1`, [live]);
    await broken(org, new RegExp(`run ${live} is completed, but no end event on the ledger ended it`), null);
  });

  it('the end kept on the row: its reason (by digest) and who ended it, as the end event recorded them', async () => {
    const { org, cancelled, completed, agent } = await orgWithRuns('Runs End Co');
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,reason}', '"routine cleanup"') WHERE id = $1`, [cancelled]);
    await broken(org, new RegExp(`run ${cancelled}: its end reason differs from the one its end event recorded \\(reasonDigest\\)`));
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,reason}', '"runaway agent"') WHERE id = $1`, [cancelled]);
    expect(await verify(org)).toMatchObject({ ok: true });
    // A reason added where none was given.
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,reason}', '"done"') WHERE id = $1`, [completed]);
    await broken(org, /end reason differs/);
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,reason}', 'null') WHERE id = $1`, [completed]);
    expect(await verify(org)).toMatchObject({ ok: true });
    // When it ended, as GET /v1/runs/:id shows it: moved a year back, or removed (the view then dates it from the row's last update).
    const [{ at }] = (await t.ds.query(`SELECT metadata->'ended'->'at' AS at FROM agent_runs WHERE id = $1`, [cancelled])) as [{ at: string }];
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,at}', to_jsonb(now() - interval '365 days')) WHERE id = $1`, [cancelled]);
    await broken(org, new RegExp(`run ${cancelled}: the time it ended differs from its end event's`));
    await t.ds.query(`UPDATE agent_runs SET metadata = metadata #- '{ended,at}' WHERE id = $1`, [cancelled]);
    await broken(org, /the time it ended differs/);
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,at}', $2::jsonb) WHERE id = $1`, [cancelled, JSON.stringify(at)]);
    expect(await verify(org)).toMatchObject({ ok: true });
    // Who ended it removed: the batches rejecting the rest of its approvals would decide them as nobody.
    await t.ds.query(`UPDATE agent_runs SET metadata = metadata #- '{ended,by}' WHERE id = $1`, [cancelled]);
    await broken(org, /who ended it differs/);
    // The end's whole record removed.
    await t.ds.query(`UPDATE agent_runs SET metadata = metadata - 'ended' WHERE id = $1`, [cancelled]);
    await broken(org, /who ended it differs/);
    await t.ds.query(`UPDATE agent_runs SET metadata = metadata || jsonb_build_object('ended', jsonb_build_object('at', now(), 'reason', 'runaway agent', 'by', jsonb_build_object('keyId', $2::text, 'role', 'agent'))) WHERE id = $1`, [
      cancelled,
      agent.id,
    ]);
    await broken(org, new RegExp(`run ${cancelled}: who ended it differs from its end event's actor`));
  });

  it('a creation time moved away from its event is a break; to infinity, refused by the table (migration 1766400000000)', async () => {
    const { org, live } = await orgWithRuns('Runs Time Co');
    await t.ds.query(`UPDATE agent_runs SET created_at = created_at - interval '1 day' WHERE id = $1`, [live]);
    await broken(org, new RegExp(`run ${live}: its creation time differs from its run.created event's`));
    await expect(t.ds.query(`UPDATE agent_runs SET created_at = 'infinity' WHERE id = $1`, [live])).rejects.toMatchObject({ code: '23514' });
    await broken(org, new RegExp(`run ${live}: its creation time differs from its run.created event's`));
  });

  it('a run handed to another agent key, or to another specialist, is a break', async () => {
    const { org, live, other } = await orgWithRuns('Runs Owner Co');
    await t.ds.query(`UPDATE agent_runs SET created_by = $2 WHERE id = $1`, [live, other.id]);
    // What the edit does: the other agent key now reaches the run.
    expect((await t.http.get(`/v1/runs/${live}`).set(bearer(other.key))).status).toBe(200);
    await broken(org, new RegExp(`run ${live}: the key that created it differs from its run.created event's`));
    const [{ created_by }] = (await t.ds.query(`SELECT actor->>'keyId' AS created_by FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.created'`, [live])) as [{ created_by: string }];
    await t.ds.query(`UPDATE agent_runs SET created_by = $2, specialist_id = 'billing' WHERE id = $1`, [live, created_by]);
    await broken(org, new RegExp(`run ${live}: its specialist differs`));
  });

  it('a run inserted around the gateway, or deleted, or moved to another org, is a break', async () => {
    const { org, completed, agent } = await orgWithRuns('Runs Rows Co');
    const forged = randomUUID();
    await t.ds.query(
      `INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata, created_by)
       VALUES ($1, $2, 'support', 'running', '{"runtimeManifest": {"allowedTools": ["shopify_refund.create"]}}', $3)`,
      [forged, org, agent.id],
    );
    await broken(org, new RegExp(`run ${forged} has no run.created event on the ledger`), null);
    await t.ds.query('DELETE FROM agent_runs WHERE id = $1', [forged]);
    expect(await verify(org)).toMatchObject({ ok: true });
    const elsewhere = await createOrg(t, 'Runs Rows Elsewhere Co');
    await t.ds.query('UPDATE agent_runs SET org_id = $2 WHERE id = $1', [completed, elsewhere]);
    await broken(org, new RegExp(`run ${completed} has events in the ledger but no row`), await eventOf(completed, 'run.created'));
    await broken(elsewhere, new RegExp(`run ${completed} has no run.created event on the ledger`));
    await t.ds.query('DELETE FROM agent_runs WHERE id = $1', [completed]);
    await broken(org, new RegExp(`run ${completed} has events in the ledger but no row`));
  });

  it('runs whose events came before the digests: the manifest is held to allowedToolCount, the end reason to reasonGiven', async () => {
    const org = await createOrg(t, 'Runs Legacy Co');
    const agent = await createKey(t, org, 'agent');
    const [run, ended] = [randomUUID(), randomUUID()];
    await t.ds.query(
      `INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata, created_by)
       VALUES ($1, $3, 'support', 'running', '{"runtimeManifest": {"allowedTools": ["order_lookup.lookup"]}}', $4),
              ($2, $3, 'support', 'completed', '{"runtimeManifest": {"allowedTools": []}, "ended": {"reason": null}}', $4)`,
      [run, ended, org, agent.id],
    );
    const actor = { keyId: agent.id, role: 'agent' };
    await t.app.get(LedgerEventsService).append([
      { orgId: org, type: 'run.created', runId: run, actor, metadata: { specialistId: 'support', allowedToolCount: 1 } },
      { orgId: org, type: 'run.created', runId: ended, actor, metadata: { specialistId: 'support', allowedToolCount: 0 } },
      { orgId: org, type: 'run.completed', runId: ended, actor, metadata: { reasonGiven: false, blockedCalls: 0 } },
    ]);
    expect(await verify(org)).toMatchObject({ ok: true });
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest,allowedTools}', '["order_lookup.lookup", "shopify_refund.create"]') WHERE id = $1`, [run]);
    await broken(org, /its manifest differs from the one its run.created event recorded \(allowedToolCount\)/);
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest,allowedTools}', '["order_lookup.lookup"]') WHERE id = $1`, [run]);
    await t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended,reason}', '"routine"') WHERE id = $1`, [ended]);
    await broken(org, new RegExp(`run ${ended}: its end reason differs from the one its end event recorded \\(reasonGiven\\)`));
  });
});
