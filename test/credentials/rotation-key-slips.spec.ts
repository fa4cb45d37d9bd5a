import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { credentialAad } from '../../src/credentials/credentials.service.js';
import { runBuiltCli } from '../support/built-cli.js';
import { keyringOf, NANGO, putNango } from './rotation-support.js';
import { NANGO_SECRET_KEY, TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { createOrg, startTestApp, type TestApp } from '../support/test-app.js';


/**
 * Slips an operator makes in README "Rotating the master key", step 2, refused before anything is written:
 * - a wrong NEW key (a valid 32-byte key, say staging's, pasted for k2) while every replica holds the right k2 and has
 *   written rows under it: re-sealing the k1 rows under it, labelled k2, would leave them unreadable to every replica;
 * - the OLD key pasted for the new id (k2:<old>,k1:<old>): the run would relabel every row and exit 0, step 3's cue
 *   to retire k1, while the key being retired still opens them all. (The gateway starts with such a keyring, saying
 *   so: a deployment already running so has rows under both ids; the way out is a rotation to a key of its own.)
 */
describe('rotation with a wrong new key while replicas already write under the right one', () => {
  let t: TestApp;
  const BOTH = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };
  beforeAll(async () => { t = await startTestApp(BOTH); });
  afterAll(async () => { await t?.close(); });

  it('is refused (exit 2) before it re-seals k1 rows under a k2 that opens none of the rows the replicas labelled k2', async () => {
    const replica = new EnvelopeCipher(keyringOf([['k2', TEST_MASTER_KEY_2], ['k1', TEST_MASTER_KEY]], 'k2'));
    const oldWriter = new EnvelopeCipher(keyringOf([['k1', TEST_MASTER_KEY]], 'k1'));
    const orgNew = await createOrg(t, 'written by a replica under k2');
    const orgOld = await createOrg(t, 'still under k1');
    await putNango(t.ds, orgNew, replica); // a replica on step 1's second restart wrote this under the right k2
    const oldEnv = await putNango(t.ds, orgOld, oldWriter); // the row to rotate
    // readable by the replicas before the run
    expect(replica.decryptJson(oldEnv, credentialAad(orgOld, 'nango'))).toEqual(NANGO);

    const wrongNew = randomBytes(32).toString('base64');
    const run = await runBuiltCli('credentials-rotate', [], {
      DATA_DIR: '.tmp/data-test',
      MASTER_ENCRYPTION_KEY: '',
      MASTER_ENCRYPTION_KEYS: `k2:${wrongNew},k1:${TEST_MASTER_KEY}`,
      MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2',
    });
    for (const s of [wrongNew, TEST_MASTER_KEY, NANGO_SECRET_KEY]) expect(run.stdout + run.stderr).not.toContain(s);
    // The k2 it was given opens none of the rows the replicas labelled k2: refused before anything is written.
    expect(run.stderr).toMatch(/the key loaded as k2 opens none of the \d+ rows labelled k2 \(credentials/);
    expect(run.stderr).toContain('nothing was written');

    const [row] = (await t.ds.query(`SELECT key_id, iv, ciphertext, auth_tag FROM integration_credentials WHERE org_id = $1`, [orgOld])) as {
      key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
    }[];
    let readable = true;
    try {
      replica.decryptJson({ keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, credentialAad(orgOld, 'nango'));
    } catch {
      readable = false;
    }
    // What the replicas can still read after the run: the org's credentials must not have been sealed under a key no replica has.
    await t.ds.query(`DELETE FROM integration_credentials WHERE org_id IN ($1, $2)`, [orgNew, orgOld]);
    expect({ exit: run.code, label: row.key_id, readableByReplicas: readable }, run.stderr).toEqual({ exit: 2, label: 'k1', readableByReplicas: true });
  });
});

describe('rotation to a "new" key that is the old key under a new id', () => {
  let t: TestApp;
  beforeAll(async () => { t = await startTestApp(); });
  afterAll(async () => { await t?.close(); });

  it('is refused (exit 2), nothing relabelled, instead of reporting the rotation done while the old key still opens every row', async () => {
    const org = await createOrg(t, 'same material');
    const old = new EnvelopeCipher(keyringOf([['k1', TEST_MASTER_KEY]], 'k1'));
    const env = old.encryptJson(NANGO, credentialAad(org, 'nango'));
    await t.ds.query(
      `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'nango', $2, $3, $4, $5, $6)`,
      [org, env.keyId, env.iv, env.ciphertext, env.authTag, old.fingerprint(NANGO, credentialAad(org, 'nango'))],
    );
    try {
      const run = await runBuiltCli('credentials-rotate', [], {
        DATA_DIR: '.tmp/data-test',
        MASTER_ENCRYPTION_KEY: '',
        MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY},k1:${TEST_MASTER_KEY}`,
        MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2',
      });
      for (const s of [TEST_MASTER_KEY, NANGO_SECRET_KEY]) expect(run.stdout + run.stderr).not.toContain(s);
      expect(run.stderr).toContain('the active key k2 is the same key as k1: rotating to it would change nothing');
      expect(run.stderr).toContain('nothing was written');
      const [row] = (await t.ds.query(`SELECT key_id, iv, ciphertext, auth_tag FROM integration_credentials WHERE org_id = $1`, [org])) as {
        key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
      }[];
      // The old key alone (what step 3 retires) still opens the "rotated" row:
      const stillOpensWithOld = (() => {
        try {
          old.decryptJson({ keyId: 'k1', iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, credentialAad(org, 'nango'));
          return true;
        } catch {
          return false;
        }
      })();
      expect({ exit: run.code, label: row.key_id, stillOpensWithOld, stdout: run.stdout.slice(0, 60) }).toEqual({ exit: 2, label: 'k1', stillOpensWithOld: true, stdout: '' });
    } finally {
      await t.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
    }
  });
});
