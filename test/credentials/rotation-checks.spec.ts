import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import type { MasterKeyring } from '../../src/config/app-config.js';
import { credentialAad } from '../../src/credentials/credentials.service.js';
import { KeyRotationService } from '../../src/credentials/key-rotation.service.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { NANGO_SECRET_KEY, TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { withQueryHook } from '../support/query-hook.js';

const BOTH_KEYS = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };
const NANGO = { secretKey: NANGO_SECRET_KEY, connectionId: 'conn-rotation', providerConfigKey: 'zendesk' };
const keyringOf = (entries: [string, string][], activeKeyId: string): MasterKeyring => ({ activeKeyId, keys: new Map(entries.map(([id, b64]) => [id, Buffer.from(b64, 'base64')])) });

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
      // the rotation has finished integration_credentials (counted its remaining) and moved on to the results
      if (!written && /FROM tool_call_results/.test(sql)) {
        written = true;
        const env = k1Only.encryptJson(NANGO, credentialAad(org, 'nango'));
        await t.ds.query(
          `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'nango', $2, $3, $4, $5, $6)`,
          [org, env.keyId, env.iv, env.ciphertext, env.authTag, k1Only.fingerprint(NANGO, credentialAad(org, 'nango'))],
        );
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
      const env = c.encryptJson(NANGO, credentialAad(org, 'nango'));
      await t.ds.query(
        `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'nango', $2, $3, $4, $5, $6)`,
        [org, env.keyId, env.iv, env.ciphertext, env.authTag, c.fingerprint(NANGO, credentialAad(org, 'nango'))],
      );
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
});
