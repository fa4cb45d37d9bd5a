import type { DataSource } from 'typeorm';
import type { Envelope, EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import type { MasterKeyring } from '../../src/config/app-config.js';
import { credentialAad } from '../../src/credentials/credentials.service.js';
import { NANGO_SECRET_KEY } from '../support/secrets.js';

/** A Nango credential config, its secret one the leak scan knows. */
export const NANGO = { secretKey: NANGO_SECRET_KEY, connectionId: 'conn-rotation', providerConfigKey: 'zendesk' };

/** A keyring of (id, base64 key) entries, as MASTER_ENCRYPTION_KEYS gives one. */
export const keyringOf = (entries: [string, string][], activeKeyId: string): MasterKeyring => ({
  activeKeyId,
  keys: new Map(entries.map(([id, b64]) => [id, Buffer.from(b64, 'base64')])),
});

/** A Nango credential of `org` sealed by `cipher` (its label and material), as a gateway with that keyring writes it. */
export async function putNango(ds: Pick<DataSource, 'query'>, org: string, cipher: EnvelopeCipher): Promise<Envelope> {
  const env = cipher.encryptJson(NANGO, credentialAad(org, 'nango'));
  await ds.query(
    `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'nango', $2, $3, $4, $5, $6)`,
    [org, env.keyId, env.iv, env.ciphertext, env.authTag, cipher.fingerprint(NANGO, credentialAad(org, 'nango'))],
  );
  return env;
}
