/**
 * Found by a review of the operator's backup-and-restore runbook: a backup restored into a shared database, its
 * `public` schema renamed `tool_gateway` and the gateway pointed there with search_path (the URL's `options`, which
 * README leaves to the operator). ledger_seq_ceiling() named the sequence in a string body
 * ('public.runtime_ledger_events_seq_seq'), so every sealer pass failed from then on: the gateway served, nothing new
 * was sealed, and verify answered ok over the part sealed before the move. (Renamed in place here: what pg_restore
 * and ALTER SCHEMA leave is the same schema under another name.)
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { emulatorEnv, setupOrg, toolUse, verifyLedger } from '../support/scenario.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { bearer, startTestApp } from '../support/test-app.js';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';

describe("the gateway's schema renamed (a restore moved into a shared database)", () => {
  let emu: VendorEmulator;
  let db: ScratchDatabase;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = await createScratchDatabase('tg_schema_renamed');
  });
  afterAll(async () => {
    await db?.drop();
    await emu?.stop();
  });

  it('keeps sealing new events there: the chain extends over them and verifies', async () => {
    const env = emulatorEnv(emu.url);
    const lookup = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const t = await startTestApp({ ...env, DATABASE_URL: db.url });
    const org = await setupOrg(t, { tools: ['order_lookup.lookup'] });
    try {
      expect((await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(lookup)).status).toBe(200);
      await t.app.get(LedgerSealerService).sealNow();
    } finally {
      await t.close();
    }
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query('ALTER SCHEMA public RENAME TO tool_gateway');
      await c.query('CREATE SCHEMA public');
      const url = new URL(db.url); // the embedded server's URL carries parameters of its own (sslmode)
      url.searchParams.set('options', '-c search_path=tool_gateway');
      const g = await startTestApp({ ...env, DATABASE_URL: url.toString() });
      try {
        const again = await g.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send({ ...lookup, id: `${lookup.id}-2` });
        expect(again.status, JSON.stringify(again.body)).toBe(200);
        // Its ceiling works there (the sealer would otherwise seal without it, and say so).
        const [{ ceiling }] = (await g.ds.query('SELECT ledger_seq_ceiling() AS ceiling')) as [{ ceiling: string }];
        expect(Number(ceiling)).toBeGreaterThan(3);
        await g.app.get(LedgerSealerService).sealNow();
        const { rows } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM tool_gateway.runtime_ledger_events WHERE hash IS NULL');
        expect(rows[0].n, 'events left unsealed after a seal pass').toBe(0);
        expect(await verifyLedger(g, org.orgId)).toMatchObject({ ok: true });
      } finally {
        await g.close();
      }
    } finally {
      await c.end();
    }
  });
});
