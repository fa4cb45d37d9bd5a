import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { DecryptionError, EnvelopeCipher, FINGERPRINT_PREFIX, type Envelope } from '../common/crypto/envelope-cipher.js';
import { NIL_UUID, newId } from '../common/ids.js';
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
  /**
   * decrypts with no loaded key: left as it is. Includes rows labelled with the active id that the active key does
   * not open (the key loaded under that id is not the material they were sealed under).
   */
  failed: number;
  /**
   * Rows still under another key once the run is done: the failed ones (those labelled with the active id included),
   * and any a writer still on the old key rewrote (or inserted) under it meanwhile. The old key may go only when
   * every table has none.
   */
  remaining: number;
}

export type RotationFailure =
  | { kind: 'credentials' | 'tokens'; orgId: string; integrationType: string; keyId: string }
  | { kind: 'results' | 'inputs'; orgId: string; toolCallId: string; keyId: string };

/**
 * Who ran a rotation, as its `credentials.rotated` events record it (`by`): the command, and the host and operating
 * system user it ran as. No API key stands behind it (it runs from a shell with the master keys), so the event has
 * no actor; this is what an auditor can go by.
 */
export interface RotationOperator {
  command: string;
  host: string;
  user: string;
}

/** What one rotation's events carry besides their counts: the run's id (its summary's too), and who ran it. */
interface RotationStamp {
  rotationId: string;
  by?: RotationOperator;
}

export interface RotationSummary {
  toKeyId: string;
  /** This run's id, on each of its `credentials.rotated` events: an org's events of one run are told from another's. */
  rotationId: string;
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
  table: string;
  /** the column that, with org_id, identifies a row (StoredRow.sub_id) */
  sub: string;
  /** SQL condition: the row holds an envelope (a lease-only vendor token holds none) */
  sealed: string;
  /** rows not under the active key, after `cursor` in primary-key order */
  select(activeKeyId: string, cursor: StoredRow | null, limit: number): [string, unknown[]];
  /** rows under `keyId`, after `cursor` in primary-key order */
  under(keyId: string, cursor: StoredRow | null, limit: number): [string, unknown[]];
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
    table,
    sub: 'integration_type',
    sealed: 'key_id IS NOT NULL',
    // With a fingerprint, also rows already under the active key whose fingerprint is in a form of earlier versions:
    // unkeyed ("sha256:…", which an ops key could test guesses against) or keyed but not bound to the org and
    // integration ("hmac:…", equal across orgs): they get the current one.
    select: (active, cursor, limit) => [
      `SELECT org_id, integration_type AS sub_id, ${COLS} FROM ${table}
       WHERE (key_id <> $1${fingerprint ? ` OR fingerprint NOT LIKE '${FINGERPRINT_PREFIX}%'` : ''}) AND (org_id, integration_type) > ($2::uuid, $3::text)
       ORDER BY org_id, integration_type LIMIT $4`,
      [active, cursor?.org_id ?? NIL_UUID, cursor?.sub_id ?? '', limit],
    ],
    under: (keyId, cursor, limit) => [
      `SELECT org_id, integration_type AS sub_id, ${COLS} FROM ${table}
       WHERE key_id = $1 AND (org_id, integration_type) > ($2::uuid, $3::text) ORDER BY org_id, integration_type LIMIT $4`,
      [keyId, cursor?.org_id ?? NIL_UUID, cursor?.sub_id ?? '', limit],
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
    table,
    sub: 'tool_call_id',
    sealed: 'true',
    select: (active, cursor, limit) => [
      `SELECT org_id, tool_call_id AS sub_id, ${COLS} FROM ${table}
       WHERE key_id <> $1 AND tool_call_id > $2::uuid ORDER BY tool_call_id LIMIT $3`,
      [active, cursor?.sub_id ?? NIL_UUID, limit],
    ],
    under: (keyId, cursor, limit) => [
      `SELECT org_id, tool_call_id AS sub_id, ${COLS} FROM ${table}
       WHERE key_id = $1 AND tool_call_id > $2::uuid ORDER BY tool_call_id LIMIT $3`,
      [keyId, cursor?.sub_id ?? NIL_UUID, limit],
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

export interface Mislabelled {
  kind: RotationFailure['kind'];
  /** the active key id */
  keyId: string;
  /**
   * Set when the active key opens rows labelled with this other id, which is not loaded: the material loaded here as
   * the active key is what the writers of those rows call `rowKeyId`. Unset: rows labelled with the active id open
   * only with another loaded key (the id was reused for new material).
   */
  rowKeyId?: string;
}

/**
 * The active key id names different material than the database's rows do: thrown by `rotate` (see checkActiveRows and
 * checkOtherLabels). Rows labelled with the active id are never re-encrypted, so with an id reused for new material
 * they would stay under the old one, and rows rotated now would carry that id for the new one. And when the active key
 * opens rows labelled with another id that is not loaded (the new key given alone as MASTER_ENCRYPTION_KEY, so loaded
 * as k1, while the replicas call it k2), re-encrypting them would relabel them with the active id: replicas holding the
 * real key of that id (the old one) could open none of them. A row whose label is loaded but does not open it, while
 * the active key does (labelled k1 under the new material by such a run before this check, or by a replica started
 * with the new key alone), is rotated: under the active id it is right again.
 */
export class MislabelledKeyIdError extends Error {
  /** `rotated`: rows this run re-encrypted before it stopped (by their own key or another not active one: right as they are) */
  constructor(
    readonly found: Mislabelled[],
    readonly rotated = 0,
  ) {
    super(
      found[0]?.rowKeyId
        ? `the key loaded as ${found[0].keyId} opens rows labelled ${found[0].rowKeyId} (${found.map((f) => f.kind).join(', ')})`
        : `key id ${found[0]?.keyId} names different material than its rows (${found.map((f) => f.kind).join(', ')})`,
    );
  }
}

/**
 * Rows are labelled with the active id and the active key opens none of them: the material loaded under that id
 * is not what the gateway's replicas seal with under it (another environment's key pasted for it). Re-encrypting
 * the other rows under it would label them with that id too, and no replica could open them. Thrown by `rotate`
 * before anything is written.
 */
export class ForeignActiveKeyError extends Error {
  constructor(
    readonly keyId: string,
    readonly rows: number,
    readonly kinds: string[],
  ) {
    super(`the key loaded as ${keyId} opens none of the ${rows} rows labelled ${keyId} (${kinds.join(', ')})`);
  }
}

/** What MasterKeyCheck learns of one key id the stored secrets are labelled with (KeyRotationService.sampleLabels). */
export interface KeyLabelSample {
  keyId: string;
  /** a key of this id is loaded */
  loaded: boolean;
  sampled: number;
  /** sampled rows opened: by the key of their id when it is loaded, else by any loaded key */
  opened: number;
  /** the loaded key ids that opened them */
  openedBy: string[];
  tables: string[];
}

/** Rows of each other label that the check before a rotation tries with the active key (the rotation checks every row it opens too). */
const LABEL_SAMPLE = 20;

/** What the check of the rows labelled with the active id found. */
interface ActiveRowsCheck {
  /** tables with a row that only another loaded key opens (the scan of a table stops at the first) */
  mislabelled: Mislabelled[];
  /** per table, rows no loaded key opens */
  unreadable: Record<RotationFailure['kind'], number>;
  /** rows the active key opened */
  opened: number;
  /** ids of the first MAX_REPORTED_FAILURES of them */
  failures: RotationFailure[];
}

/**
 * Re-encrypts every stored credential, result, approval input and vendor token state that is not under the active
 * master key. Each row is its own conditional UPDATE, committed per batch with its orgs' events: an interrupted run
 * has lost nothing and a re-run picks up exactly the rows still under an old key
 * (rotated rows carry the active key id and are never re-encrypted again; each run only checks that the active key
 * opens them). Run it after every replica has the new key loaded and active; remove the old key after it (when no
 * table has rows `remaining`).
 */
@Injectable()
export class KeyRotationService {
  constructor(
    private readonly ds: DataSource,
    private readonly cipher: EnvelopeCipher,
    private readonly events: LedgerEventsService,
  ) {}

  /**
   * First every row labelled with the active id is checked to open with the active key (see checkActiveRows: the
   * rows are not selected for re-encryption, so a key loaded under that id that is not their material would
   * otherwise report "all done"); a row only another loaded key opens throws MislabelledKeyIdError before anything
   * is written, and rows no loaded key opens are `failed`. Then every row under another key is re-encrypted.
   */
  async rotate(opts: { batchSize?: number; by?: RotationOperator; rotationId?: string } = {}): Promise<RotationSummary> {
    const batchSize = opts.batchSize ?? 200;
    // Given by the caller (the CLI says it before it starts, so a run that dies midway can be found on the ledger).
    const stamp: RotationStamp = { rotationId: opts.rotationId ?? newId(), ...(opts.by ? { by: opts.by } : {}) };
    const toKeyId = this.cipher.activeKeyId;
    const checked = await this.checkActiveRows(batchSize);
    if (checked.mislabelled.length > 0) throw new MislabelledKeyIdError(checked.mislabelled);
    // Some rows under the active id not opening are failures to report; none opening is the wrong key.
    const unreadable = Object.entries(checked.unreadable).filter(([, n]) => n > 0);
    if (checked.opened === 0 && unreadable.length > 0) {
      throw new ForeignActiveKeyError(toKeyId, unreadable.reduce((n, [, k]) => n + k, 0), unreadable.map(([kind]) => kind));
    }
    const relabelled = await this.checkOtherLabels();
    if (relabelled.length > 0) throw new MislabelledKeyIdError(relabelled);
    const loaded = new Set(this.cipher.keyIds);
    const orgsTouched = new Set<string>();
    const failures: RotationFailure[] = checked.failures;
    const summary: RotationSummary = { toKeyId, rotationId: stamp.rotationId, credentials: counts(), results: counts(), inputs: counts(), tokens: counts(), orgsTouched: 0, failures };
    for (const spec of this.specs()) summary[spec.kind].failed = checked.unreadable[spec.kind];
    for (const spec of this.specs()) {
      const tally = summary[spec.kind];
      let cursor: StoredRow | null = null;
      for (;;) {
        const [sql, params] = spec.select(toKeyId, cursor, batchSize);
        const rows = (await this.ds.query(sql, params)) as StoredRow[];
        const sealed: Resealed[] = [];
        for (const row of rows) {
          const aad = spec.aad(row);
          const opened = this.openAny(row, aad);
          // Past checkOtherLabels' sample: stop before this batch is written (the batches before it were opened by
          // their own key, or another one not active, and are right under the active key).
          if (opened?.by === toKeyId && row.key_id !== toKeyId && !loaded.has(row.key_id)) {
            const rotated = this.specs().reduce((n, s) => n + summary[s.kind].rotated, 0);
            throw new MislabelledKeyIdError([{ kind: spec.kind, keyId: toKeyId, rowKeyId: row.key_id }], rotated);
          }
          if (opened) sealed.push({ row, env: this.cipher.encrypt(opened.plaintext, aad), plaintext: opened.plaintext });
          // Labelled with the active id (selected for its fingerprint's form): counted by checkActiveRows already.
          else if (row.key_id === toKeyId) continue;
          else {
            tally.failed++;
            if (failures.length < MAX_REPORTED_FAILURES) failures.push(failureOf(spec.kind, row));
          }
        }
        const written = await this.writeBatch(spec, toKeyId, sealed, stamp);
        tally.rotated += written.rotated;
        tally.skipped += written.skipped;
        for (const org of written.orgs) orgsTouched.add(org);
        if (rows.length < batchSize) break;
        cursor = rows[rows.length - 1];
      }
    }
    // Counted once every table is done: a writer still on the old key may have written any table meanwhile.
    // Rows under the active id that it does not open are still under another key, whatever their label.
    for (const spec of this.specs()) summary[spec.kind].remaining = (await this.remaining(spec, toKeyId)) + checked.unreadable[spec.kind];
    summary.orgsTouched = orgsTouched.size;
    return summary;
  }

  /**
   * Every key id the stored secrets are labelled with, the first `perTable` rows of each label in each table tried
   * (read-only): a loaded key that opens none of its rows is not the material this database was written with (a backup
   * restored with another environment's key, a mistyped key); rows under a label no loaded key has are unreadable,
   * unless a loaded key opens them (`openedBy`: loaded under another id than its rows'). The gateway says so at
   * start-up (MasterKeyCheck). Stored results are not looked at: their table is large, and the labels of every other
   * table tell the same story.
   */
  async sampleLabels(perTable = 5): Promise<KeyLabelSample[]> {
    const loaded = new Set(this.cipher.keyIds);
    const found = new Map<string, KeyLabelSample>();
    for (const spec of this.specs().filter((s) => s.kind !== 'results')) {
      const labels = (await this.ds.query(`SELECT DISTINCT key_id FROM ${spec.table} WHERE ${spec.sealed} ORDER BY key_id`)) as { key_id: string }[];
      for (const { key_id: keyId } of labels) {
        const sample = found.get(keyId) ?? { keyId, loaded: loaded.has(keyId), sampled: 0, opened: 0, openedBy: [], tables: [] };
        found.set(keyId, sample);
        const [sql, params] = spec.under(keyId, null, perTable);
        const rows = (await this.ds.query(sql, params)) as StoredRow[];
        if (rows.length > 0) sample.tables.push(spec.table);
        sample.sampled += rows.length;
        for (const row of rows) {
          const by = sample.loaded ? (this.open(row, keyId, spec.aad(row)) ? keyId : undefined) : this.openAny(row, spec.aad(row))?.by;
          if (by === undefined) continue;
          sample.opened++;
          if (!sample.openedBy.includes(by)) sample.openedBy.push(by);
        }
      }
    }
    return [...found.values()];
  }

  /**
   * The active key id when it names different material than some of its rows (say k2 reused for the next key
   * while rows sealed under the old k2 remain): see checkActiveRows. Read-only; `rotate` runs the same check.
   */
  async mislabelledKeyIds(batchSize = 500): Promise<Mislabelled[]> {
    return (await this.checkActiveRows(batchSize)).mislabelled;
  }

  /**
   * Every row labelled with the active id, tried with the active key (not a sample: replicas already write new rows
   * under it), in batches. The rotation never selects these rows, so one the active key does not open would stay
   * as it is while the run reported all done: the key loaded under that id is not their material (the new key
   * alone as MASTER_ENCRYPTION_KEY, or an id reused for new material). A row another loaded key opens makes the id
   * mislabelled (the table's scan stops there); one no loaded key opens is unreadable. Rows under other ids are the
   * rotation's business: it tries every key.
   */
  private async checkActiveRows(batchSize: number): Promise<ActiveRowsCheck> {
    const active = this.cipher.activeKeyId;
    const others = this.cipher.keyIds.filter((k) => k !== active);
    const found: ActiveRowsCheck = { mislabelled: [], unreadable: { credentials: 0, results: 0, inputs: 0, tokens: 0 }, failures: [], opened: 0 };
    for (const spec of this.specs()) {
      let cursor: StoredRow | null = null;
      let wrong = false;
      while (!wrong) {
        const [sql, params] = spec.under(active, cursor, batchSize);
        const rows = (await this.ds.query(sql, params)) as StoredRow[];
        for (const row of rows) {
          const aad = spec.aad(row);
          if (this.open(row, active, aad)) {
            found.opened++;
            continue;
          }
          wrong = others.some((k) => this.open(row, k, aad));
          if (wrong) break;
          found.unreadable[spec.kind]++;
          if (found.failures.length < MAX_REPORTED_FAILURES) found.failures.push(failureOf(spec.kind, row));
        }
        if (rows.length < batchSize) break;
        cursor = rows[rows.length - 1];
      }
      if (wrong) found.mislabelled.push({ kind: spec.kind, keyId: active });
    }
    return found;
  }

  /**
   * For each table and each label that is not loaded, the first LABEL_SAMPLE rows tried with the active key: one it
   * opens means the active key is known to that row's writers by the other id, and the rotation would relabel their
   * rows (see MislabelledKeyIdError). Rows of one label are sealed under one material, so a sample finds the usual
   * mistake before anything is written; the rotation stops at any row it missed. (A loaded label's rows the active
   * key opens are rows a wrong run relabelled: rotating them is their repair.)
   */
  private async checkOtherLabels(): Promise<Mislabelled[]> {
    const active = this.cipher.activeKeyId;
    const found: Mislabelled[] = [];
    for (const spec of this.specs()) {
      const labels = (await this.ds.query(`SELECT DISTINCT key_id FROM ${spec.table} WHERE ${spec.sealed} AND NOT (key_id = ANY($1::text[])) ORDER BY key_id`, [
        this.cipher.keyIds,
      ])) as { key_id: string }[];
      for (const { key_id: label } of labels) {
        const [sql, params] = spec.under(label, null, LABEL_SAMPLE);
        const rows = (await this.ds.query(sql, params)) as StoredRow[];
        if (rows.some((row) => this.openAny(row, spec.aad(row))?.by === active)) found.push({ kind: spec.kind, keyId: active, rowKeyId: label });
      }
    }
    return found;
  }

  private specs(): TableSpec[] {
    const credentials = byIntegration('credentials', 'integration_credentials', credentialAad, (plaintext, aad) =>
      this.cipher.fingerprint(JSON.parse(plaintext.toString('utf8')), aad),
    );
    return [credentials, RESULTS, INPUTS, TOKENS];
  }

  /**
   * One batch's UPDATEs and the `credentials.rotated` events of the orgs whose rows they rotated, in one
   * transaction: a run interrupted at any point has an event for every row it rotated, and a re-run (which only
   * finds the rows still under an old key) records none twice. The rows were re-encrypted before it began, so it
   * holds their locks only for the UPDATEs.
   */
  private async writeBatch(spec: TableSpec, toKeyId: string, sealed: Resealed[], stamp: RotationStamp): Promise<{ rotated: number; skipped: number; orgs: string[] }> {
    if (sealed.length === 0) return { rotated: 0, skipped: 0, orgs: [] };
    return this.ds.transaction(async (manager) => {
      const perOrg = new Map<string, number>();
      let skipped = 0;
      for (const { row, env, plaintext } of sealed) {
        const [upd, params] = spec.update(row, env, plaintext);
        // Changed by a concurrent writer since it was read: its version wins.
        if (affected(await manager.query(upd, params)) === 0) skipped++;
        else perOrg.set(row.org_id, (perOrg.get(row.org_id) ?? 0) + 1);
      }
      await this.recordEvents(manager, toKeyId, spec.kind, perOrg, stamp);
      return { rotated: sealed.length - skipped, skipped, orgs: [...perOrg.keys()] };
    });
  }

  /** Rows of the table still under another key than the active one. */
  private async remaining(spec: TableSpec, toKeyId: string): Promise<number> {
    const [{ n }] = (await this.ds.query(`SELECT count(*)::int AS n FROM ${spec.table} WHERE ${spec.sealed} AND key_id <> $1`, [toKeyId])) as [{ n: number }];
    return n;
  }

  /** The row's plaintext under `keyId`, or null when that key does not open it. */
  private open(row: StoredRow, keyId: string, aad: string): Buffer | null {
    try {
      return this.cipher.decrypt({ keyId, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, aad);
    } catch (err) {
      if (err instanceof DecryptionError) return null;
      throw err;
    }
  }

  /**
   * The row's plaintext and the id of the loaded key that opened it, or null when none does. The row's own key first;
   * then every other one, in case a key was loaded under another id (the active one: the caller's business).
   */
  private openAny(row: StoredRow, aad: string): { plaintext: Buffer; by: string } | null {
    for (const keyId of [row.key_id, ...this.cipher.keyIds.filter((id) => id !== row.key_id)]) {
      const plaintext = this.open(row, keyId, aad);
      if (plaintext) return { plaintext, by: keyId };
    }
    return null;
  }

  private async recordEvents(manager: EntityManager, toKeyId: string, kind: RotationFailure['kind'], perOrg: Map<string, number>, stamp: RotationStamp): Promise<void> {
    const all = [...perOrg].map(([orgId, n]) => {
      const by: PerOrg = { credentials: 0, results: 0, inputs: 0, tokens: 0, [kind]: n };
      return {
        orgId,
        type: 'credentials.rotated',
        // The token count only when there is one: orgs without rotating grants keep the event they always had.
        metadata: { toKeyId, credentials: by.credentials, results: by.results, inputs: by.inputs, ...(by.tokens > 0 ? { tokens: by.tokens } : {}), ...stamp },
      };
    });
    for (let i = 0; i < all.length; i += 500) await this.events.append(all.slice(i, i + 500), manager);
  }
}

const counts = (): RotationCounts => ({ rotated: 0, skipped: 0, failed: 0, remaining: 0 });

/** A row read for rotation and re-encrypted under the active key, not yet written. */
interface Resealed {
  row: StoredRow;
  env: Envelope;
  plaintext: Buffer;
}

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
