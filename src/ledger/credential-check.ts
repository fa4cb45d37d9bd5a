import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';

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
 */
export async function firstCredentialOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  const rows = (await db.query(
    `WITH last AS (
       SELECT DISTINCT ON (e.metadata->>'integrationType') e.metadata->>'integrationType' AS integration_type, e.id, e.seq, e.chain_seq,
              e.type, e.metadata->>'keyId' AS key_id, e.metadata->>'fingerprint' AS fingerprint
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type IN ('credentials.updated', 'credentials.deleted') AND e.metadata ? 'integrationType'
        ORDER BY e.metadata->>'integrationType', e.seq DESC)
     SELECT l.integration_type, l.id, l.chain_seq, l.type, l.key_id, l.fingerprint,
            c.org_id IS NOT NULL AS has_row, c.key_id AS row_key_id, c.fingerprint AS row_fingerprint,
            (SELECT COALESCE(jsonb_agg(r.metadata->>'toKeyId'), '[]'::jsonb) FROM runtime_ledger_events r
              WHERE r.org_id = $1 AND r.type = 'credentials.rotated' AND r.seq > l.seq
                AND (jsonb_typeof(r.metadata->'credentials') <> 'number' OR (r.metadata->>'credentials')::numeric > 0)) AS rotated_to
       FROM last l
       LEFT JOIN integration_credentials c ON c.org_id = $1 AND c.integration_type = l.integration_type
      ORDER BY l.chain_seq NULLS LAST, l.seq`,
    [orgId],
  )) as {
    integration_type: string; id: string; chain_seq: string | null; type: string; key_id: string | null; fingerprint: string | null;
    has_row: boolean; row_key_id: string | null; row_fingerprint: string | null; rotated_to: (string | null)[];
  }[];
  for (const r of rows) {
    const at = { chainSeq: Number(r.chain_seq ?? 0), eventId: r.id };
    // The integration type is not quoted: the event is chained, but a row's neighbour may hold anything.
    if (r.type === 'credentials.deleted') {
      if (r.has_row) return { ...at, reason: 'credentials of an integration are stored, but their last event on the ledger deleted them' };
      continue;
    }
    if (!r.has_row) return { ...at, reason: 'credentials of an integration are missing, but their last event on the ledger stored them' };
    const asPut = r.row_fingerprint === r.fingerprint && (r.key_id === null || r.row_key_id === r.key_id);
    const rotated = r.row_key_id !== null && r.rotated_to.includes(r.row_key_id);
    if (!asPut && !rotated) {
      return { ...at, reason: 'credentials of an integration differ from the ones their last event on the ledger stored (key id or fingerprint)' };
    }
  }
  return null;
}
