import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventHash } from '../../src/ledger/ledger-chain.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

describe('ledger chain verification (API and CLI)', () => {
  let t: TestApp;
  /** A superuser connection: the only way to rewrite the append-only ledger, as an attacker with database access would. */
  let su: pg.Client;

  /** An org whose chain holds org.created plus `n` events, all sealed. */
  async function orgWithChain(n: number): Promise<string> {
    const org = await createOrg(t, 'Chain');
    const events = t.app.get(LedgerEventsService);
    for (let i = 0; i < n; i++) await events.append([{ orgId: org, type: 'test.step', metadata: { i, amount: `${i}.00` } }]);
    await t.app.get(LedgerSealerService).sealNow();
    return org;
  }

  async function tamper(sql: string, params: unknown[]): Promise<void> {
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger (and foreign keys)
    await su.query(sql, params);
    await su.query('COMMIT');
  }

  async function verify(org: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(adminAuth);
    return { status: res.status, body: res.body as Record<string, unknown> };
  }

  async function cli(args: string[], env: NodeJS.ProcessEnv = { DATABASE_URL: process.env.DATABASE_URL }): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(args, env, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err };
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

  it('reports a clean chain as ok with its head hash, over the API and the CLI', async () => {
    const org = await orgWithChain(10);
    const [head] = (await t.ds.query(`SELECT hash FROM runtime_ledger_events WHERE org_id = $1 ORDER BY chain_seq DESC LIMIT 1`, [org])) as { hash: string }[];
    const res = await verify(org);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, checked: 11, headHash: head.hash });
    const run = await cli(['--org', org]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.out[0])).toEqual(res.body);
    expect((await cli(['--org', org, '--no-seal'])).code).toBe(0);
  });

  it('detects an UPDATE of one event’s metadata at its position', async () => {
    const org = await orgWithChain(10);
    await tamper(`UPDATE runtime_ledger_events SET metadata = '{"i":4,"amount":"4000.00"}' WHERE org_id = $1 AND chain_seq = 5`, [org]);
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, checked: 4, brokenAt: { chainSeq: 5, reason: 'event content does not match its hash' } });
    const run = await cli(['--org', org]);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.out[0])).toEqual(res.body);
  });

  // Every field the event hash covers (eventHash; sealer and verifier share it, so dropping one would still verify).
  it.each<[string, string, () => string]>([
    ['actor (who acted)', 'actor = $2::jsonb', () => JSON.stringify({ keyId: randomUUID(), role: 'admin' })],
    ['type (what happened)', 'type = $2', () => 'test.other'],
    ['run_id', 'run_id = $2::uuid', () => randomUUID()],
    ['tool_call_id', 'tool_call_id = $2::uuid', () => randomUUID()],
  ])('detects an UPDATE of one event’s %s at its position', async (_field, set, value) => {
    const org = await orgWithChain(8);
    expect((await verify(org)).body).toMatchObject({ ok: true });
    await tamper(`UPDATE runtime_ledger_events SET ${set} WHERE org_id = $1 AND chain_seq = 5`, [org, value()]);
    const res = await verify(org);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: false, checked: 4, brokenAt: { chainSeq: 5, reason: 'event content does not match its hash' } });
  });

  it('detects a DELETE of one event at its position', async () => {
    const org = await orgWithChain(10);
    await tamper(`DELETE FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq = 7`, [org]);
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, checked: 6, brokenAt: { chainSeq: 7, eventId: null, reason: 'event missing from the chain' } });
    expect((await cli(['--org', org])).code).toBe(1);
  });

  it('detects two events swapped in the chain order at the first of them', async () => {
    const org = await orgWithChain(10);
    const [a] = (await t.ds.query(`SELECT id FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq = 4`, [org])) as { id: string }[];
    const [b] = (await t.ds.query(`SELECT id FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq = 8`, [org])) as { id: string }[];
    // Through a free value: (org_id, chain_seq) is unique.
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = -1 WHERE id = $1`, [a.id]);
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = 4 WHERE id = $1`, [b.id]);
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = 8 WHERE id = $1`, [a.id]);
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, checked: 3, brokenAt: { chainSeq: 4, eventId: b.id } });
    expect((await cli(['--org', org])).code).toBe(1);
  });

  it('detects a swap of adjacent events even with their links rewritten', async () => {
    const org = await orgWithChain(6);
    const rows = (await t.ds.query(`SELECT id, prev_hash, hash FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq IN (3, 4) ORDER BY chain_seq`, [org])) as {
      id: string; prev_hash: string; hash: string;
    }[];
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = -1 WHERE id = $1`, [rows[0].id]);
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = 3, prev_hash = $2 WHERE id = $1`, [rows[1].id, rows[0].prev_hash]);
    await tamper(`UPDATE runtime_ledger_events SET chain_seq = 4, prev_hash = $2 WHERE id = $1`, [rows[0].id, rows[1].hash]);
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, brokenAt: { chainSeq: 3, eventId: rows[1].id, reason: 'event content does not match its hash' } });
  });

  it('hashes created_at with its era: an event moved to the same date BC is a break; AD text (and every hash sealed with it) is as before', async () => {
    const org = await orgWithChain(1);
    const [e] = (await t.ds.query(
      `SELECT id, org_id, chain_seq, type, metadata, prev_hash, hash,
              to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS old_text
         FROM runtime_ledger_events WHERE org_id = $1 AND type = 'test.step'`,
      [org],
    )) as { id: string; org_id: string; chain_seq: string; type: string; metadata: unknown; prev_hash: string; hash: string; old_text: string }[];
    // The era is added only before 1 AD: an AD event's hash still covers the text it was sealed over before.
    const fields = { id: e.id, orgId: e.org_id, chainSeq: Number(e.chain_seq), type: e.type, runId: null, toolCallId: null, actor: null, metadata: e.metadata };
    expect(eventHash(e.prev_hash, { ...fields, createdIso: e.old_text })).toBe(e.hash);
    // 'YYYY' has no era: the same date 4,051 years earlier printed (and hashed) alike.
    await tamper(
      `UPDATE runtime_ledger_events
          SET created_at = ((to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || ' BC')::timestamp AT TIME ZONE 'UTC')
        WHERE id = $1`,
      [e.id],
    );
    const [moved] = (await t.ds.query(`SELECT created_at::text AS c FROM runtime_ledger_events WHERE id = $1`, [e.id])) as { c: string }[];
    expect(moved.c).toMatch(/ BC$/);
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, checked: 1, brokenAt: { chainSeq: 2, eventId: e.id, reason: 'event content does not match its hash' } });
    expect((await cli(['--org', org])).code).toBe(1);
  });

  it.each([
    ['a hash but no chain position', 'NULL'],
    ['a chain position below 1', '0'],
  ])('detects an event inserted around the gateway with %s (it would show in listings, off the chain)', async (_what, chainSeq) => {
    const org = await orgWithChain(3);
    const [{ id }] = (await su.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, prev_hash, hash, chain_seq, sealed_at)
       VALUES (gen_random_uuid(), $1, 'test.forged', '{}'::jsonb, $2, $2, ${chainSeq}, now()) RETURNING id`,
      [org, 'f'.repeat(64)],
    )).rows as { id: string }[];
    const res = await verify(org);
    expect(res.body).toMatchObject({ ok: false, checked: 4, brokenAt: { eventId: id, reason: 'event outside the chain' } });
    expect((await cli(['--org', org])).code).toBe(1);
  });

  it('scopes verification: org keys their own org, platform keys must name one', async () => {
    const org = await orgWithChain(1);
    const other = await orgWithChain(1);
    const ops = (await createKey(t, org, 'ops')).key;
    const own = await t.http.get('/v1/ledger/verify').set(bearer(ops));
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ ok: true, checked: 3 }); // org.created, test.step, api_key.created
    expect((await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(bearer(ops))).status).toBe(200);
    expect((await t.http.get('/v1/ledger/verify').query({ orgId: other }).set(bearer(ops))).status).toBe(404);
    const platform = await t.http.get('/v1/ledger/verify').set(adminAuth);
    expect(platform.status).toBe(400);
    expect(platform.body.code).toBe('VALIDATION_FAILED');
    expect((await t.http.get('/v1/ledger/verify').query({ orgId: 'nope' }).set(adminAuth)).status).toBe(400);
    const agent = (await createKey(t, org, 'agent')).key;
    expect((await t.http.get('/v1/ledger/verify').set(bearer(agent))).status).toBe(403);
  });

  it('CLI: usage errors exit 2 (without touching the database), and so does an org that does not exist', async () => {
    expect((await cli([])).code).toBe(2);
    expect((await cli(['--org'])).code).toBe(2);
    expect((await cli(['--org', 'not-a-uuid'])).code).toBe(2);
    expect((await cli(['--org', '00000000-0000-0000-0000-000000000001', '--frobnicate'])).code).toBe(2);
    const missing = await cli(['--org', '00000000-0000-4000-8000-00000000dead']);
    expect(missing.code).toBe(2); // not "intact": there is no such org
    expect(missing.out).toEqual([]);
    expect(missing.err.join('\n')).toContain('no org');
    const noUrl = await cli(['--org', '00000000-0000-0000-0000-000000000001'], {});
    expect(noUrl.code).toBe(2);
    expect(noUrl.err.join('\n')).toContain('DATABASE_URL');
  });

  it('CLI: a malformed DATABASE_URL is a configuration error (2) that names the variable, never the password', async () => {
    for (const url of ['postgres://u:p#S3cretPW@127.0.0.1/db', 'mysql://u:S3cretPW@127.0.0.1/db']) {
      const bad = await cli(['--org', '00000000-0000-0000-0000-000000000000'], { DATABASE_URL: url });
      expect(bad.code, url).toBe(2);
      expect(bad.err.join('\n')).toMatch(/^DATABASE_URL must be/);
      expect(bad.err.join('\n')).not.toContain('S3cretPW');
    }
  });

  it('CLI: reads DATABASE_URL as the gateway, migrate and credentials-rotate do: only spaces is unset (2), spaces around a URL are dropped', async () => {
    for (const blank of ['   ', '\n']) {
      const unset = await cli(['--org', '00000000-0000-0000-0000-000000000000'], { DATABASE_URL: blank });
      expect({ code: unset.code, first: unset.err.join('\n').split('\n')[0] }).toEqual({ code: 2, first: expect.stringMatching(/^DATABASE_URL is required, or a gateway running on its embedded database in DATA_DIR /) });
    }
    // A pasted or mounted secret with its spaces or newline: verified, not "could not verify" (3).
    const org = await orgWithChain(1);
    const padded = await cli(['--org', org], { DATABASE_URL: ` ${process.env.DATABASE_URL!}\n` });
    expect(padded.code, padded.err.join('\n')).toBe(0);
    expect(JSON.parse(padded.out[0])).toMatchObject({ ok: true, checked: 2 });
  });
});
