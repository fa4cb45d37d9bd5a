import { DecryptionError, FINGERPRINT_PREFIX, type EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { credentialAad } from '../credentials/credentials.service.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';
import { AFTER_IN_CHAIN_ORDER, LAST_IN_CHAIN_ORDER } from './ledger-chain.js';

/**
 * Opens a credentials row for the check below: the fingerprint its config has under master key `keyId`, the key that
 * was active when its event recorded one; 'unopenable' when the row's key is loaded but the row does not open under
 * it; undefined when a key is not loaded here (nothing to tell: the stored columns are checked instead).
 */
export type CredentialOpener = (orgId: string, integration: string, row: { keyId: string; iv: Buffer; ciphertext: Buffer; authTag: Buffer }, keyId: string) => string | 'unopenable' | undefined;

export function credentialOpener(cipher: EnvelopeCipher): CredentialOpener {
  return (orgId, integration, row, keyId) => {
    if (!cipher.keyIds.includes(row.keyId) || !cipher.keyIds.includes(keyId)) return undefined;
    let config: unknown;
    try {
      config = cipher.decryptJson(row, credentialAad(orgId, integration));
    } catch (err) {
      if (err instanceof DecryptionError || err instanceof SyntaxError) return 'unopenable';
      throw err;
    }
    return cipher.fingerprintUnder(keyId, config, credentialAad(orgId, integration));
  };
}

/**
 * The org's live credentials rows against the credentials events that recorded them, for chain verification. The
 * envelope's associated data binds a ciphertext to its org and integration only: an earlier ciphertext of the same
 * org and integration (a config an admin replaced) put back in the row around the gateway still opens, and is used.
 * Every write of the row records it on the chain (CredentialsService.put: `credentials.updated` with its key id and
 * fingerprint; remove: `credentials.deleted`; KeyRotationService: `credentials.rotated`, with the key it re-encrypted
 * the org's rows under and how many, which re-encrypts and re-fingerprints them, the fingerprint being keyed by the
 * active master key). So, for each integration whose last put or delete is on the ledger:
 * - after a delete there is no row; after a put there is one;
 * - with no rotation of the org's credentials since, the row holds the put's key id and fingerprint;
 * - with one since, it holds those (a row the rotation did not rotate) or is under a key a rotation since named
 *   (its fingerprint, recomputed by the rotation, is on no event: not checked).
 * An integration with no put or delete on the ledger (rows written before the events, or by hand) is not checked.
 * With an `open`er (the gateway's keyring: GET /v1/ledger/verify), the config sealed in the row is itself checked
 * against the event's fingerprint, recomputed under the key the put ran under: the stored columns alone let an
 * earlier ciphertext be put back under the current fingerprint (a writer of the table, without the master key), and
 * the gateway used the replaced config while verify said intact. A rotation since changes nothing to that check.
 */
export async function firstCredentialOffLedger(db: ChainReader, orgId: string, open?: CredentialOpener): Promise<VerifyBreak | null> {
  const rows = (await db.query(
    `WITH last AS (
       SELECT DISTINCT ON (e.metadata->>'integrationType') e.metadata->>'integrationType' AS integration_type, e.id, e.seq, e.chain_seq,
              e.type, e.metadata->>'keyId' AS key_id, e.metadata->>'fingerprint' AS fingerprint
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type IN ('credentials.updated', 'credentials.deleted') AND e.metadata ? 'integrationType'
        ORDER BY e.metadata->>'integrationType', ${LAST_IN_CHAIN_ORDER('e')})
     SELECT l.integration_type, l.id, l.chain_seq, l.type, l.key_id, l.fingerprint,
            c.org_id IS NOT NULL AS has_row, c.key_id AS row_key_id, c.fingerprint AS row_fingerprint, c.iv, c.ciphertext, c.auth_tag,
            (SELECT COALESCE(jsonb_agg(r.metadata->>'toKeyId'), '[]'::jsonb) FROM runtime_ledger_events r
              WHERE r.org_id = $1 AND r.type = 'credentials.rotated' AND ${AFTER_IN_CHAIN_ORDER('r', 'l')}
                AND (jsonb_typeof(r.metadata->'credentials') <> 'number' OR (r.metadata->>'credentials')::numeric > 0)) AS rotated_to
       FROM last l
       LEFT JOIN integration_credentials c ON c.org_id = $1 AND c.integration_type = l.integration_type
      ORDER BY l.chain_seq NULLS LAST, l.seq`,
    [orgId],
  )) as {
    integration_type: string; id: string; chain_seq: string | null; type: string; key_id: string | null; fingerprint: string | null;
    has_row: boolean; row_key_id: string | null; row_fingerprint: string | null; iv: Buffer | null; ciphertext: Buffer | null; auth_tag: Buffer | null;
    rotated_to: (string | null)[];
  }[];
  for (const r of rows) {
    const at = { chainSeq: Number(r.chain_seq ?? 0), eventId: r.id };
    // The integration type is not quoted: the event is chained, but a row's neighbour may hold anything.
    if (r.type === 'credentials.deleted') {
      if (r.has_row) return { ...at, reason: 'credentials of an integration are stored, but their last event on the ledger deleted them' };
      continue;
    }
    if (!r.has_row) return { ...at, reason: 'credentials of an integration are missing, but their last event on the ledger stored them' };
    const sealed =
      open && r.key_id !== null && r.fingerprint?.startsWith(FINGERPRINT_PREFIX) && r.row_key_id !== null && r.iv && r.ciphertext && r.auth_tag
        ? open(orgId, r.integration_type, { keyId: r.row_key_id, iv: r.iv, ciphertext: r.ciphertext, authTag: r.auth_tag }, r.key_id)
        : undefined;
    if (sealed === 'unopenable') return { ...at, reason: 'credentials of an integration differ from the ones their last event on the ledger stored (they do not open under their key id)' };
    if (sealed !== undefined && sealed !== r.fingerprint) {
      return { ...at, reason: 'credentials of an integration differ from the ones their last event on the ledger stored (the config sealed in the row)' };
    }
    const asPut = r.row_fingerprint === r.fingerprint && (r.key_id === null || r.row_key_id === r.key_id);
    const rotated = r.row_key_id !== null && r.rotated_to.includes(r.row_key_id);
    if (!asPut && !rotated) {
      return { ...at, reason: 'credentials of an integration differ from the ones their last event on the ledger stored (key id or fingerprint)' };
    }
  }
  return null;
}
