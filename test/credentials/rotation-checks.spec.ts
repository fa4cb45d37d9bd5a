import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher, type Envelope } from '../../src/common/crypto/envelope-cipher.js';
import type { DataSource } from 'typeorm';
import { KeyRotationService, MislabelledKeyIdError, type RotationSummary } from '../../src/credentials/key-rotation.service.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { resultAad } from '../../src/tool-calls/results.store.js';
import { runBuiltCli } from '../support/built-cli.js';
import { keyringOf, putNango } from './rotation-support.js';
import { NANGO_SECRET_KEY, TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { withQueryHook } from '../support/query-hook.js';

const BOTH_KEYS = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };

/** Drops the org's seeded credentials and results. */
async function dropSealed(ds: DataSource, org: string): Promise<void> {
  await ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
  await ds.query(`DELETE FROM tool_call_results WHERE org_id = $1`, [org]);
}

const rotationEvents = (ds: DataSource, org: string): Promise<unknown> =>
  ds.query(`SELECT 1 FROM runtime_ledger_events WHERE org_id = $1 AND type = 'credentials.rotated'`, [org]);

/** A stored result of call `toolCallId` sealed by `cipher`. */
async function putResult(ds: DataSource, org: string, toolCallId: string, cipher: EnvelopeCipher, text: string): Promise<Envelope> {
  const env = cipher.encrypt(text, resultAad(org, toolCallId));
  await ds.query(
    `INSERT INTO tool_call_results (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag, size_bytes, expires_at) VALUES ($1, $2, $3, $4, $5, $6, 11, now() + interval '1 day')`,
    [toolCallId, org, env.keyId, env.iv, env.ciphertext, env.authTag],
  );
  return env;
}

/**
 * The rotation's safety checks, each against what an operator would be told: `remaining` is counted after every
 * table is done (a writer still on the old key may write any table meanwhile), and an active key id given new
 * material is found whichever of its rows comes first.
 */
describe('key rotation: remaining rows and reused key ids', () => {
  let t: TestApp;
  beforeAll(async () => { t = await startTestApp(BOTH_KEYS); });
  afterAll(async () => { await t?.close(); });

  it('a credential a lagging writer puts under k1 while later tables are rotated is in `remaining` (exit 0 would say: remove k1)', async () => {
    const org = await createOrg(t, 'rotation lagging writer');
    const k1Only = new EnvelopeCipher(keyringOf([['k1', TEST_MASTER_KEY]], 'k1'));
    let written = false;
    const hooked = withQueryHook(t.ds, async (sql) => {
      // the rotation has finished integration_credentials (counted its remaining) and moved on to the results (its
      // re-encrypting pass, which selects the rows not under the active key: the check of the active key's rows comes first)
      if (!written && /FROM tool_call_results\s+WHERE key_id <>/.test(sql)) {
        written = true;
        await putNango(t.ds, org, k1Only);
      }
    });
    try {
      const summary = await new KeyRotationService(hooked, t.app.get(EnvelopeCipher), t.app.get(LedgerEventsService)).rotate();
      expect(written).toBe(true);
      const [{ n }] = (await t.ds.query(`SELECT count(*)::int AS n FROM integration_credentials WHERE key_id <> 'k2'`)) as [{ n: number }];
      expect(n).toBeGreaterThan(0);
      // what the run reports as still under another key vs what is under one when it returns
      expect(summary.credentials.remaining).toBe(n);
    } finally {
      await t.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
    }
  });

  it('an active key id reused for new material is found though a row already written under the new material comes first', async () => {
    const oldMaterial = randomBytes(32).toString('base64');
    const fresh = randomBytes(32).toString('base64');
    const before = new EnvelopeCipher(keyringOf([['lt2', oldMaterial]], 'lt2')); // the first rotation's key
    const now = new EnvelopeCipher(keyringOf([['lt2', fresh], ['lt1', oldMaterial]], 'lt2')); // id reused, old listed as lt1
    const orgNew = await createOrg(t, 'rotation fresh material');
    const orgOld = await createOrg(t, 'rotation old material');
    const put = async (org: string, c: EnvelopeCipher) => {
      await putNango(t.ds, org, c);
    };
    try {
      // a replica already on the new keyring wrote one credential (the documented order: replicas first, then the CLI)
      await put(orgNew, now);
      await put(orgOld, before);
      const rotation = new KeyRotationService(t.ds, now, t.app.get(LedgerEventsService));
      const found = await rotation.mislabelledKeyIds();
      // the old row labelled lt2 opens only with lt1: the CLI must refuse (exit 2)
      expect(found).toContainEqual({ kind: 'credentials', keyId: 'lt2' });
    } finally {
      await t.ds.query(`DELETE FROM integration_credentials WHERE org_id IN ($1, $2)`, [orgNew, orgOld]);
    }
  });

  it('a reused active key id found in a later table (results) stops the rotation before it writes anything, in any table', async () => {
    const oldMaterial = randomBytes(32).toString('base64');
    const before = new EnvelopeCipher(keyringOf([['lt2', oldMaterial]], 'lt2'));
    const now = new EnvelopeCipher(keyringOf([['lt2', randomBytes(32).toString('base64')], ['lt1', oldMaterial]], 'lt2'));
    const old = new EnvelopeCipher(keyringOf([['lt1', oldMaterial]], 'lt1'));
    const org = await createOrg(t, 'rotation reused id, results');
    const cred = await putNango(t.ds, org, old); // to rotate: the id lt1 is right for it
    const toolCallId = randomUUID();
    await putResult(t.ds, org, toolCallId, before, '{"ok":true}'); // labelled lt2, sealed under the old material
    try {
      const rotation = new KeyRotationService(t.ds, now, t.app.get(LedgerEventsService));
      const err = await rotation.rotate().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(MislabelledKeyIdError);
      expect((err as MislabelledKeyIdError).found).toEqual([{ kind: 'results', keyId: 'lt2' }]);
      const [row] = (await t.ds.query(`SELECT key_id, iv FROM integration_credentials WHERE org_id = $1`, [org])) as { key_id: string; iv: Buffer }[];
      expect([row.key_id, row.iv.equals(cred.iv)]).toEqual(['lt1', true]);
      expect(await rotationEvents(t.ds, org)).toEqual([]);
    } finally {
      await dropSealed(t.ds, org);
    }
  });

  /**
   * Replicas run k2 (new) and k1 (old); the operator runs the CLI with only the new key, as MASTER_ENCRYPTION_KEY
   * (which loads it as k1). Rows the replicas wrote under k2 open with that "k1": re-encrypted, they would be
   * relabelled k1 under the new material, and replicas reading k1 with the old material could open none of them.
   * Fresh random material under a fresh id ("rx2") stands for k2, so no other row of the shared database opens.
   */
  it('the new key alone (MASTER_ENCRYPTION_KEY, so k1) opening rows labelled k2: refused (exit 2) before anything is written', async () => {
    const newMaterial = randomBytes(32).toString('base64');
    const replica = new EnvelopeCipher(keyringOf([['rx2', newMaterial]], 'rx2'));
    const org = await createOrg(t, 'rotation new key alone');
    const env = await putNango(t.ds, org, replica);
    const toolCallId = randomUUID();
    const res = await putResult(t.ds, org, toolCallId, replica, '{"ok":true}');
    try {
      const run = await runBuiltCli('credentials-rotate', [], { DATA_DIR: '.tmp/data-test', MASTER_ENCRYPTION_KEY: newMaterial });
      expect(run.code, run.stdout + run.stderr).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain('the key loaded as k1 opens rows labelled rx2 (credentials, results)');
      expect(run.stderr).toContain('nothing was written');
      for (const s of [newMaterial, TEST_MASTER_KEY, NANGO_SECRET_KEY]) expect(run.stdout + run.stderr).not.toContain(s);
      const rows = (await t.ds.query(
        `SELECT key_id, iv FROM integration_credentials WHERE org_id = $1 UNION ALL SELECT key_id, iv FROM tool_call_results WHERE tool_call_id = $2`,
        [org, toolCallId],
      )) as { key_id: string; iv: Buffer }[];
      expect(rows.map((r) => [r.key_id, r.iv.equals(env.iv) || r.iv.equals(res.iv)])).toEqual([['rx2', true], ['rx2', true]]);
      expect(await rotationEvents(t.ds, org)).toEqual([]);
    } finally {
      await dropSealed(t.ds, org);
    }
  });

  it('a row labelled with another id that only the active key opens stops the rotation where it is found, though no sampled row showed it', async () => {
    const newMaterial = randomBytes(32).toString('base64');
    const replica = new EnvelopeCipher(keyringOf([['rx3', newMaterial]], 'rx3'));
    const stranger = new EnvelopeCipher(keyringOf([['rx3', randomBytes(32).toString('base64')]], 'rx3')); // material nobody here has
    const active = new EnvelopeCipher(keyringOf([['k1', newMaterial]], 'k1'));
    const org = await createOrg(t, 'rotation new key alone, late row');
    // Past any sample: many rows labelled rx3 that no loaded key opens, then one (last in key order) the active key opens.
    const ids = Array.from({ length: 60 }, () => randomUUID()).sort();
    for (const [i, id] of ids.entries()) {
      await putResult(t.ds, org, id, (i === ids.length - 1 ? replica : stranger), '{"ok":true}');
    }
    try {
      const err = await new KeyRotationService(t.ds, active, t.app.get(LedgerEventsService)).rotate({ batchSize: 7 }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(MislabelledKeyIdError);
      expect((err as MislabelledKeyIdError).found).toEqual([{ kind: 'results', keyId: 'k1', rowKeyId: 'rx3' }]);
      const labels = (await t.ds.query(`SELECT DISTINCT key_id FROM tool_call_results WHERE org_id = $1`, [org])) as { key_id: string }[];
      expect(labels).toEqual([{ key_id: 'rx3' }]);
      expect(await rotationEvents(t.ds, org)).toEqual([]);
    } finally {
      await t.ds.query(`DELETE FROM tool_call_results WHERE org_id = $1`, [org]);
    }
  });

  /**
   * The repair of what the check above prevents (a run before it, or a replica started with the new key alone, left rows
   * labelled k1 under the new material, which replicas on k2:<new>,k1:<old> cannot read): a run with both keys
   * re-encrypts them under k2 like the rest of k1's rows. Their label is loaded, so they are not the check's business.
   * Fresh ids (ro1 old, ro2 new) and material.
   */
  it('rows labelled with the old id but sealed under the new key (left by a wrong run) are put back under the new id by a run with both keys', async () => {
    const oldMaterial = randomBytes(32).toString('base64');
    const newMaterial = randomBytes(32).toString('base64');
    const oldWriter = new EnvelopeCipher(keyringOf([['ro1', oldMaterial]], 'ro1'));
    const wrongRun = new EnvelopeCipher(keyringOf([['ro1', newMaterial]], 'ro1')); // the new key alone, loaded as "ro1"
    const replica = new EnvelopeCipher(keyringOf([['ro2', newMaterial], ['ro1', oldMaterial]], 'ro2'));
    const org = await createOrg(t, 'rotation relabel repair');
    // old rows first, then relabelled ones: past the check's sample of the label too
    const sealers = [...Array.from({ length: 25 }, () => oldWriter), ...Array.from({ length: 3 }, () => wrongRun), replica];
    const ids = sealers.map(() => randomUUID()).sort();
    for (const [i, id] of ids.entries()) {
      await putResult(t.ds, org, id, sealers[i], JSON.stringify({ i }));
    }
    try {
      const run = await runBuiltCli('credentials-rotate', ['--batch-size=10'], {
        DATA_DIR: '.tmp/data-test',
        MASTER_ENCRYPTION_KEY: '',
        MASTER_ENCRYPTION_KEYS: `ro2:${newMaterial},ro1:${oldMaterial}`,
        MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'ro2',
      });
      // Not refused (exit 2). Exit 1 when the shared database holds other tests' rows, under keys this run does not
      // have; its own rows are all rotated.
      expect(run.stderr).not.toContain('opens rows labelled');
      expect([0, 1], run.stderr).toContain(run.code);
      const rows = (await t.ds.query(`SELECT tool_call_id, key_id, iv, ciphertext, auth_tag FROM tool_call_results WHERE org_id = $1 ORDER BY tool_call_id`, [org])) as {
        tool_call_id: string; key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
      }[];
      expect(rows.map((r) => [r.key_id, replica.decryptJson({ keyId: r.key_id, iv: r.iv, ciphertext: r.ciphertext, authTag: r.auth_tag }, resultAad(org, r.tool_call_id))])).toEqual(
        ids.map((_, i) => ['ro2', { i }]),
      );
      for (const s of [newMaterial, oldMaterial]) expect(run.stdout + run.stderr).not.toContain(s);
    } finally {
      await t.ds.query(`DELETE FROM tool_call_results WHERE org_id = $1`, [org]);
    }
  });

  /**
   * The operator's mistake this guards against: the CLI run with only the new key (MASTER_ENCRYPTION_KEY=<new>, which
   * is k1) or with an id reused for new material and the old one not loaded. The rows labelled with the active id were
   * never selected, every count was 0 and the run exited 0, "the old key may go": removing it lost everything. A fresh
   * key (not TEST_MASTER_KEY_2) opens no row of the shared database: the key loaded as k1 is not the replicas' k1, and
   * rows of other labels re-sealed under it would be unreadable to them, so the run stops before writing anything.
   */
  it.each([
    ['MASTER_ENCRYPTION_KEY=<another key> (k1)', (other: string) => ({ MASTER_ENCRYPTION_KEY: other })],
    ['MASTER_ENCRYPTION_KEYS=k1:<another key>, active k1', (other: string) => ({ MASTER_ENCRYPTION_KEYS: `k1:${other}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' })],
    [
      'MASTER_ENCRYPTION_KEYS=k1:<another key>,k0:<a third>, active k1',
      (other: string) => ({ MASTER_ENCRYPTION_KEYS: `k1:${other},k0:${randomBytes(32).toString('base64')}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' }),
    ],
  ])('%s: an active key that opens none of the rows labelled with its id is refused (exit 2), nothing written, never "all done"', async (_what, keys) => {
    const org = await createOrg(t, 'rotation wrong key');
    const k1Only = new EnvelopeCipher(keyringOf([['k1', TEST_MASTER_KEY]], 'k1'));
    const env = await putNango(t.ds, org, k1Only);
    const other = randomBytes(32).toString('base64');
    try {
      const run = await runBuiltCli('credentials-rotate', [], { DATA_DIR: '.tmp/data-test', MASTER_ENCRYPTION_KEY: '', ...keys(other) });
      expect(run.code, run.stdout + run.stderr).toBe(2);
      expect(run.stdout).toBe(''); // no summary: nothing was done
      expect(run.stderr).toMatch(/the key loaded as k1 opens none of the \d+ rows labelled k1 \(credentials[^)]*\): it is not the key the gateway seals with as k1/);
      expect(run.stderr).toContain('nothing was written');
      for (const s of [other, TEST_MASTER_KEY, NANGO_SECRET_KEY]) expect(run.stdout + run.stderr).not.toContain(s);
      // Left as it was.
      const [row] = (await t.ds.query(`SELECT key_id, iv FROM integration_credentials WHERE org_id = $1`, [org])) as { key_id: string; iv: Buffer }[];
      expect([row.key_id, row.iv.equals(env.iv)]).toEqual(['k1', true]);
    } finally {
      await t.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
    }
  });

  it('a row labelled with the active id that the active key does not open, among rows it does, is a failure (exit 1), never "all done"', async () => {
    const org = await createOrg(t, 'rotation one foreign row');
    const mine = await createOrg(t, 'rotation one own row');
    // A fresh id and material of their own (the shared database's other rows are no business of this run's): one row the
    // active key sealed, and one labelled with its id but sealed under other material (another environment's).
    const material = randomBytes(32).toString('base64');
    await putNango(t.ds, mine, new EnvelopeCipher(keyringOf([['rx1', material]], 'rx1')));
    const foreign = await putNango(t.ds, org, new EnvelopeCipher(keyringOf([['rx1', randomBytes(32).toString('base64')]], 'rx1')));
    try {
      const run = await runBuiltCli('credentials-rotate', [], {
        DATA_DIR: '.tmp/data-test',
        MASTER_ENCRYPTION_KEY: '',
        MASTER_ENCRYPTION_KEYS: `rx1:${material}`,
        MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'rx1',
      });
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const summary = JSON.parse(run.stdout) as RotationSummary;
      expect(summary.toKeyId).toBe('rx1');
      // The rows under the active id are checked first: the failures list starts with them.
      expect(summary.failures[0]).toEqual({ kind: 'credentials', keyId: 'rx1', orgId: org, integrationType: 'nango' });
      expect(run.stderr).toContain('rows labelled rx1 do not open with the key loaded as rx1');
      for (const s of [material, NANGO_SECRET_KEY]) expect(run.stdout + run.stderr).not.toContain(s);
      const [row] = (await t.ds.query(`SELECT key_id, iv FROM integration_credentials WHERE org_id = $1`, [org])) as { key_id: string; iv: Buffer }[];
      expect([row.key_id, row.iv.equals(foreign.iv)]).toEqual(['rx1', true]);
    } finally {
      await t.ds.query(`DELETE FROM integration_credentials WHERE org_id IN ($1, $2)`, [org, mine]);
    }
  });
});
