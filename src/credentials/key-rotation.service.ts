import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DecryptionError, EnvelopeCipher, FINGERPRINT_PREFIX, type Envelope } from '../common/crypto/envelope-cipher.js';
import { NIL_UUID } from '../common/ids.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { resultAad } from '../tool-calls/results.store.js';
import { inputAad } from '../tool-calls/tool-calls.service.js';
import { credentialAad } from './credentials.service.js';
import { vendorTokenAad } from './vendor-token.store.js';

export interface RotationCounts {
  /** re-encrypted under the active key */
  rotated: number;
  /** changed by a concurrent writer between read and update (its version wins) */
  skipped: number;
  /** decrypts with no loaded key: left as it is */
  failed: number;
}

export type RotationFailure =
  | { kind: 'credentials' | 'tokens'; orgId: string; integrationType: string; keyId: string }
  | { kind: 'results' | 'inputs'; orgId: string; toolCallId: string; keyId: string };

export interface RotationSummary {
  toKeyId: string;
  credentials: RotationCounts;
  results: RotationCounts;
  /** raw params of calls waiting for approval */
  inputs: RotationCounts;
  /** vendor token state of rotating refresh-token grants (vendor_tokens) */
  tokens: RotationCounts;
  orgsTouched: number;
  /** ids only, never contents; the first MAX_REPORTED_FAILURES of them */
  failures: RotationFailure[];
}

interface StoredRow {
  org_id: string;
  /** integration_type or tool_call_id: with the table, the row's identity */
  sub_id: string;
  key_id: string;
  iv: Buffer;
  ciphertext: Buffer;
  auth_tag: Buffer;
}

interface TableSpec {
  kind: RotationFailure['kind'];
  /** rows not under the active key, after `cursor` in primary-key order */
  select(activeKeyId: string, cursor: StoredRow | null, limit: number): [string, unknown[]];
  /** conditional on the row still holding what was read, so a concurrent writer wins; `plaintext`: what the row holds */
  update(row: StoredRow, env: Envelope, plaintext: Buffer): [string, unknown[]];
  aad(row: StoredRow): string;
}

const COLS = 'key_id, iv, ciphertext, auth_tag';

/**
 * Tables keyed by (org_id, integration_type): credentials, and the token state of rotating grants (a lease-only row has key_id NULL).
 * `fingerprint`: the table keeps the config's fingerprint, keyed by the active master key and bound to the row's
 * AAD (org + integration), so it is recomputed too.
 */
function byIntegration(
  kind: 'credentials' | 'tokens',
  table: string,
  aad: (orgId: string, type: string) => string,
  fingerprint?: (plaintext: Buffer, aad: string) => string,
): TableSpec {
  return {
    kind,
    // With a fingerprint, also rows already under the active key whose fingerprint is in a form of earlier versions:
    // unkeyed ("sha256:…", which an ops key could test guesses against) or keyed but not bound to the org and
    // integration ("hmac:…", equal across orgs): they get the current one.
    select: (active, cursor, limit) => [
      `SELECT org_id, integration_type AS sub_id, ${COLS} FROM ${table}
       WHERE (key_id <> $1${fingerprint ? ` OR fingerprint NOT LIKE '${FINGERPRINT_PREFIX}%'` : ''}) AND (org_id, integration_type) > ($2::uuid, $3::text)
       ORDER BY org_id, integration_type LIMIT $4`,
      [active, cursor?.org_id ?? NIL_UUID, cursor?.sub_id ?? '', limit],
    ],
    update: (row, env, plaintext) => [
      `UPDATE ${table} SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4${fingerprint ? ', fingerprint = $9' : ''}
       WHERE org_id = $5 AND integration_type = $6 AND key_id = $7 AND iv = $8 RETURNING org_id`,
      [env.keyId, env.iv, env.ciphertext, env.authTag, row.org_id, row.sub_id, row.key_id, row.iv, ...(fingerprint ? [fingerprint(plaintext, aad(row.org_id, row.sub_id))] : [])],
    ],
    aad: (row) => aad(row.org_id, row.sub_id),
  };
}

const TOKENS = byIntegration('tokens', 'vendor_tokens', vendorTokenAad);

/** Tables keyed by tool_call_id (results, pending approval inputs): same shape, own table and AAD. */
function byToolCallId(kind: 'results' | 'inputs', table: string, aad: (orgId: string, toolCallId: string) => string): TableSpec {
  return {
    kind,
    select: (active, cursor, limit) => [
      `SELECT org_id, tool_call_id AS sub_id, ${COLS} FROM ${table}
       WHERE key_id <> $1 AND tool_call_id > $2::uuid ORDER BY tool_call_id LIMIT $3`,
      [active, cursor?.sub_id ?? NIL_UUID, limit],
    ],
    update: (row, env) => [
      `UPDATE ${table} SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4
       WHERE tool_call_id = $5 AND key_id = $6 AND iv = $7 RETURNING org_id`,
      [env.keyId, env.iv, env.ciphertext, env.authTag, row.sub_id, row.key_id, row.iv],
    ],
    aad: (row) => aad(row.org_id, row.sub_id),
  };
}

const RESULTS = byToolCallId('results', 'tool_call_results', resultAad);
const INPUTS = byToolCallId('inputs', 'tool_call_inputs', inputAad);

const MAX_REPORTED_FAILURES = 100;

/**
 * Re-encrypts every stored credential, result, approval input and vendor token state that is not under the active
 * master key. Each row is its own conditional UPDATE: an interrupted run has
 * lost nothing and a re-run picks up exactly the rows still under an old key
 * (rotated rows carry the active key id and are never read again). Run it after
 * every replica has the new key loaded and active; remove the old key after it.
 */
@Injectable()
export class KeyRotationService {
  constructor(
    private readonly ds: DataSource,
    private readonly cipher: EnvelopeCipher,
    private readonly events: LedgerEventsService,
  ) {}

  async rotate(opts: { batchSize?: number } = {}): Promise<RotationSummary> {
    const batchSize = opts.batchSize ?? 200;
    const toKeyId = this.cipher.activeKeyId;
    const perOrg = new Map<string, PerOrg>();
    const failures: RotationFailure[] = [];
    const summary: RotationSummary = { toKeyId, credentials: counts(), results: counts(), inputs: counts(), tokens: counts(), orgsTouched: 0, failures };
    const credentials = byIntegration('credentials', 'integration_credentials', credentialAad, (plaintext, aad) =>
      this.cipher.fingerprint(JSON.parse(plaintext.toString('utf8')), aad),
    );
    try {
      for (const spec of [credentials, RESULTS, INPUTS, TOKENS]) {
        const tally = summary[spec.kind];
        let cursor: StoredRow | null = null;
        for (;;) {
          const [sql, params] = spec.select(toKeyId, cursor, batchSize);
          const rows = (await this.ds.query(sql, params)) as StoredRow[];
          for (const row of rows) {
            const opened = this.reencrypt(row, spec.aad(row));
            if (!opened) {
              tally.failed++;
              if (failures.length < MAX_REPORTED_FAILURES) failures.push(failureOf(spec.kind, row));
              continue;
            }
            const [upd, updParams] = spec.update(row, opened.env, opened.plaintext);
            if (affected(await this.ds.query(upd, updParams)) === 0) {
              tally.skipped++;
              continue;
            }
            tally.rotated++;
            const org = perOrg.get(row.org_id) ?? { credentials: 0, results: 0, inputs: 0, tokens: 0 };
            org[spec.kind]++;
            perOrg.set(row.org_id, org);
          }
          if (rows.length < batchSize) break;
          cursor = rows[rows.length - 1];
        }
      }
    } catch (err) {
      // Also after a failure part-way: what was rotated is on record; a re-run records the rest. The
      // failure is what the operator must see, even if recording the events fails too (the database
      // that just failed the rotation may well fail that as well).
      summary.orgsTouched = perOrg.size;
      await this.recordEvents(toKeyId, perOrg).catch(() => undefined);
      throw err;
    }
    summary.orgsTouched = perOrg.size;
    await this.recordEvents(toKeyId, perOrg);
    return summary;
  }

  /** The row under the active key, or null when no loaded key opens it. */
  private reencrypt(row: StoredRow, aad: string): { env: Envelope; plaintext: Buffer } | null {
    // The row's own key first; then every other one, in case a key was re-labelled.
    const candidates = [row.key_id, ...this.cipher.keyIds.filter((id) => id !== row.key_id)];
    for (const keyId of candidates) {
      try {
        const plaintext = this.cipher.decrypt({ keyId, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, aad);
        return { env: this.cipher.encrypt(plaintext, aad), plaintext };
      } catch (err) {
        if (!(err instanceof DecryptionError)) throw err;
      }
    }
    return null;
  }

  private async recordEvents(toKeyId: string, perOrg: Map<string, PerOrg>): Promise<void> {
    const all = [...perOrg].map(([orgId, n]) => ({
      orgId,
      type: 'credentials.rotated',
      // The token count only when there is one: orgs without rotating grants keep the event they always had.
      metadata: { toKeyId, credentials: n.credentials, results: n.results, inputs: n.inputs, ...(n.tokens > 0 ? { tokens: n.tokens } : {}) },
    }));
    for (let i = 0; i < all.length; i += 500) await this.events.append(all.slice(i, i + 500));
  }
}

const counts = (): RotationCounts => ({ rotated: 0, skipped: 0, failed: 0 });

type PerOrg = Record<RotationFailure['kind'], number>;

function failureOf(kind: RotationFailure['kind'], row: StoredRow): RotationFailure {
  return kind === 'credentials' || kind === 'tokens'
    ? { kind, orgId: row.org_id, integrationType: row.sub_id, keyId: row.key_id }
    : { kind, orgId: row.org_id, toolCallId: row.sub_id, keyId: row.key_id };
}

/** Rows changed by an UPDATE; TypeORM's postgres driver answers `[rows, rowCount]` for it. */
function affected(res: unknown): number {
  if (Array.isArray(res) && res.length === 2 && typeof res[1] === 'number') return res[1];
  throw new Error('unexpected UPDATE result shape');
}
