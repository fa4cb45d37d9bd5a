/**
 * Found by hand-made mutation testing: the other verify tests tamper only with metadata, chain_seq and
 * created_at. Dropping `actor`, `type`, `runId` or `toolCallId` from eventHash (src/ledger/ledger-chain.ts) — sealer
 * and verifier both use it, so every chain still verifies — passes the whole suite. Each case here fails with the
 * matching field dropped (e.g. `actor: e.actor ?? null,` → `actor: null,`).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

describe('ledger: every chained field is covered by the event hash', () => {
  let t: TestApp;
  let su: pg.Client;

  async function orgWithChain(n: number): Promise<string> {
    const org = await createOrg(t, 'Chain');
    const events = t.app.get(LedgerEventsService);
    for (let i = 0; i < n; i++) {
      await events.append([{ orgId: org, type: 'test.step', actor: { keyId: randomUUID(), role: 'expert' }, metadata: { i } }]);
    }
    await t.app.get(LedgerSealerService).sealNow();
    return org;
  }

  async function tamper(sql: string, params: unknown[]): Promise<void> {
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger (and foreign keys)
    await su.query(sql, params);
    await su.query('COMMIT');
  }

  beforeAll(async () => {
    t = await startTestApp();
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  const edits: [string, string, () => unknown][] = [
    ['actor (who acted)', `UPDATE runtime_ledger_events SET actor = $2::jsonb WHERE org_id = $1 AND chain_seq = 5`, () => JSON.stringify({ keyId: randomUUID(), role: 'admin' })],
    ['type (what happened)', `UPDATE runtime_ledger_events SET type = $2 WHERE org_id = $1 AND chain_seq = 5`, () => 'test.other'],
    ['run_id', `UPDATE runtime_ledger_events SET run_id = $2::uuid WHERE org_id = $1 AND chain_seq = 5`, () => randomUUID()],
    ['tool_call_id', `UPDATE runtime_ledger_events SET tool_call_id = $2::uuid WHERE org_id = $1 AND chain_seq = 5`, () => randomUUID()],
  ];

  it.each(edits)('an UPDATE of one event’s %s breaks the chain at that event', async (_field, sql, value) => {
    const org = await orgWithChain(8);
    expect((await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(adminAuth)).body).toMatchObject({ ok: true });
    await tamper(sql, [org, value()]);
    const res = await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(adminAuth);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: false, checked: 4, brokenAt: { chainSeq: 5, reason: 'event content does not match its hash' } });
  });
});
