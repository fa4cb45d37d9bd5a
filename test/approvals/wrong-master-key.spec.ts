import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { loadConfig } from '../../src/config/app-config.js';
import { KeyRotationService } from '../../src/credentials/key-rotation.service.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { emulatorEnv, setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { bearer, createKey, startTestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse } from './support.js';

/**
 * A gateway started with the wrong master key (a backup restored with another environment's key, a mistyped
 * key) cannot open the approved input of a call a human approved. That is no reason to fail the call and delete
 * its input: the approval and the data are intact, only this process's key is wrong. The call waits, approved,
 * and the start-up check says at once that the key does not open the database's secrets; started with the right
 * key, the gateway runs the call once. In a database of its own: the check samples the rows of every org.
 */
describe('started with the wrong master key', () => {
  let h: Harness;
  let scratch: ScratchDatabase | undefined;
  let db: { DATABASE_URL: string };
  const WRONG = { MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY_2 }; // loaded as k1, like the key it replaces
  beforeAll(async () => {
    scratch = await createScratchDatabase('tg_wrong_key');
    db = { DATABASE_URL: scratch.url };
    h = await startHarness(db);
  });
  afterAll(async () => {
    await h?.close();
    await scratch?.drop(); // leak-scanned first: the run-wide scan never sees it
  });
  const refunds = () => h.emu.vendor<ShopifyEmulator>('shopify').refundCount('12345');

  /** A refund of `amount` on order 12345 waiting for an expert of a new org, with its approval. */
  async function waitingRefund(amount: string) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = (await createKey(h.t, org.orgId, 'expert')).key;
    const submitted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount, '12345'));
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const id = submitted.body.toolCallId as string;
    return { org, expert, id, approval: await approvalFor(h, expert, id) };
  }

  it('an approved call waits with its input kept, the start-up check names the key, and the right key runs the call once', async () => {
    const { org, expert, id, approval } = await waitingRefund('3.00');
    const before = refunds();
    const row = async () =>
      ((await h.t.ds.query(
        'SELECT c.status, c.error_code, (SELECT count(*)::int FROM tool_call_inputs i WHERE i.tool_call_id = c.id) AS inputs FROM tool_calls c WHERE c.id = $1',
        [id],
      )) as { status: string; error_code: string | null; inputs: number }[])[0];
    await h.t.close();

    // The wrong key: the start-up check says so, naming the key id and where it looked, never a secret.
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db, ...WRONG });
    const keyErrors = () => h.t.logs.filter((l) => l.includes('"context":"MasterKeys"') && l.includes('"level":50'));
    expect(keyErrors(), h.t.logs.filter((l) => l.includes('MasterKeys')).join('\n')).toHaveLength(1);
    expect(keyErrors()[0]).toContain('the master key loaded as \\"k1\\" opens none of the');
    expect(keyErrors()[0]).toMatch(/integration_credentials.*tool_call_inputs/);

    // The expert approves on the wrong-key gateway: the decision stands, the call is not run, and nothing is lost.
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    const notRun = () => h.t.logs.filter((l) => l.includes('approved call not run: no loaded master key opens its approved input') && l.includes(id));
    await waitFor(async () => notRun().length > 0, 'the runner to try the approved call', 10_000);
    // Said once, and left out of the sweep (it would take the org × vendor's turns on every pass).
    expect(await h.t.app.get(ApprovedCallRunner).sweep()).toMatchObject({ started: 0 });
    expect(notRun()).toHaveLength(1);
    expect(notRun()[0]).toContain('"keyId":"k1"');
    expect(await row()).toEqual({ status: 'approved', error_code: null, inputs: 1 });
    expect(refunds()).toBe(before);
    await h.t.close();

    // The right key: the start-up sweep runs the approved call, once; the check has nothing to say.
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db });
    const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=10000`).set(bearer(org.agentKey));
    expect(settled.body, JSON.stringify(settled.body)).toMatchObject({ status: 'succeeded' });
    expect(refunds() - before).toBe(1);
    expect(await row()).toEqual({ status: 'succeeded', error_code: null, inputs: 0 });
    expect(keyErrors()).toHaveLength(0);
  }, 60_000);

  it('an unreadable approved input re-sealed under a loaded key meanwhile (credentials:rotate beside the gateway) runs at a later sweep, without a restart', async () => {
    const { org, expert, id, approval } = await waitingRefund('2.00');
    const before = refunds();
    await h.t.close();

    // The gateway has only the next key, k2: the rows are under k1, which was removed before they were rotated.
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db, MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2}` });
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    await waitFor(async () => h.t.logs.some((l) => l.includes('approved call not run') && l.includes(id)), 'the runner to try the approved call', 10_000);
    // credentials:rotate beside it, with both keys: the input and the org's credentials sealed again under k2.
    const both = loadConfig({
      NODE_ENV: 'test', DATABASE_URL: db.DATABASE_URL, MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2',
    });
    const rotated = await new KeyRotationService(h.t.ds, new EnvelopeCipher(both.keyring), h.t.app.get(LedgerEventsService)).rotate();
    expect(rotated).toMatchObject({ inputs: { failed: 0, remaining: 0 }, credentials: { failed: 0, remaining: 0 } });
    expect(rotated.inputs.rotated).toBeGreaterThan(0);
    const runner = h.t.app.get(ApprovedCallRunner);
    expect(await runner.sweep()).toMatchObject({ started: 0 }); // left out until its next try
    h.t.app.get(Clock).advance(61_000);
    try {
      await runner.sweep();
      const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=10000`).set(bearer(org.agentKey));
      expect(settled.body, JSON.stringify(settled.body)).toMatchObject({ status: 'succeeded' });
      expect(refunds() - before).toBe(1);
    } finally {
      h.t.app.get(Clock).advance(-61_000);
    }
    await h.t.close();
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db }); // the right key again, for afterAll's close
  }, 60_000);

  it('started with none of the keys the secrets are labelled with (another environment\'s key, under another id): the start-up check says so', async () => {
    await h.t.close();
    const other = `k3:${randomBytes(32).toString('base64')}`; // the database holds rows labelled k2 only (rotated above)
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db, MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: other });
    try {
      const said = h.t.logs.filter((l) => l.includes('"context":"MasterKeys"') && l.includes('"level":50'));
      expect(said.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual([
        expect.stringMatching(/^stored secrets are labelled "k2" \(integration_credentials.*\), a key id this gateway has not loaded, and none of its keys opens them: load the key they were written with as "k2"/),
      ]);
      expect(said[0]).not.toContain(other.slice(3)); // never the key itself
    } finally {
      await h.t.close();
      h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db });
    }
  }, 60_000);
});
