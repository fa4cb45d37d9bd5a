import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { runBuiltCli } from '../support/built-cli.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/** The built CLI, as an operator runs it (`npm run ledger:verify -- --org <id> | jq`), against the test database. */
const runCli = (args: string[]) => runBuiltCli('ledger-verify', args, { FORCE_COLOR: '1' });

/**
 * The CLI's seal pass covers every org, so an unhashable unsealed event of ANOTHER org makes the sealer warn
 * while one org is verified. That warning is for the operator (stderr); stdout is the JSON result alone.
 */
describe('ledger-verify CLI (built dist/): stdout is the JSON result only', () => {
  let t: TestApp;
  /** A superuser connection: the gateway never writes such an event, only writes around it do. */
  let su: pg.Client;
  const poisoned: string[] = [];

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    // The database is shared with the rest of the run: leave no event that stops a chain.
    if (su) {
      await su.query('BEGIN');
      await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger
      await su.query('DELETE FROM runtime_ledger_events WHERE id = ANY($1::uuid[])', [poisoned]).catch(() => undefined);
      await su.query('COMMIT');
      await su.end();
    }
    await t?.close();
  });

  it('prints one JSON line on stdout while the sealer warns of another org’s unhashable event on stderr', async () => {
    const victim = await createOrg(t, 'CLI stdout verified');
    const other = await createOrg(t, 'CLI stdout unhashable');
    await t.app.get(LedgerEventsService).append([{ orgId: victim, type: 'test.step', metadata: { i: 1 } }]);
    const [{ id: poison }] = (
      await su.query(`INSERT INTO runtime_ledger_events (id, org_id, type, metadata) VALUES (gen_random_uuid(), $1, 'test.injected', '{"n": 1e400}'::jsonb) RETURNING id`, [
        other,
      ])
    ).rows as { id: string }[];
    poisoned.push(poison);

    const run = await runCli(['--org', victim]);
    expect(run.code, run.stderr).toBe(0);
    // stdout is exactly the result, as the API reports it, and nothing else.
    expect(run.stdout.trimEnd().split('\n'), run.stdout).toHaveLength(1);
    const result = JSON.parse(run.stdout) as unknown;
    expect(run.stdout).toBe(`${JSON.stringify(result)}\n`);
    const api = await t.http.get('/v1/ledger/verify').query({ orgId: victim }).set(adminAuth);
    expect(api.status).toBe(200);
    expect(result).toEqual(api.body);
    expect(result).toMatchObject({ ok: true, checked: expect.any(Number) as number });
    // The warning was written, and to stderr, plain (no colour codes: FORCE_COLOR is set, the logger is not Nest's console one).
    expect(run.stderr).toMatch(new RegExp(`^ledger-verify: warn \\[LedgerSealer\\] ledger chain of org ${other} stopped at event ${poison}\\b`, 'm'));
    expect(run.stderr).not.toContain('\u001b[');
  });
});
