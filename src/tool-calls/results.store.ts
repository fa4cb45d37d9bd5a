import { Inject, Injectable, Logger, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { Clock } from '../common/clock.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { DecryptionError, EnvelopeCipher, type Envelope } from '../common/crypto/envelope-cipher.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import type { StoredResult } from './tool-call-body.js';

/** Binds a stored result to its org and call: a row moved elsewhere fails to decrypt. */
export const resultAad = (orgId: string, toolCallId: string): string => `result:${orgId}:${toolCallId}`;

export interface EncryptedResult extends Envelope {
  sizeBytes: number;
  expiresAt: Date;
}

/**
 * Full (unredacted) results, encrypted with the credentials' scheme and kept
 * for RESULT_TTL_SECONDS, for idempotent replays, approval pick-up and
 * truncated results. Writes happen inside the outcome statement (see
 * ToolCallLedger); this reads them back and purges expired ones.
 */
const PURGE_EVERY_MS = 10 * 60_000;
/** Rows one purge statement deletes. */
const PURGE_BATCH = 5_000;

@Injectable()
export class ResultsStore implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('ResultsStore');
  private capping: Promise<number> = Promise.resolve(0);
  /** Set by shutdown: a pass ends after its statement in flight, and the rest of its backlog waits for the next process. */
  private stopping = false;
  private readonly task = new PeriodicTask('purge of expired results', PURGE_EVERY_MS, () => this.purgeExpired(this.clock.now()), this.log);

  constructor(
    private readonly sql: Sql,
    private readonly cipher: EnvelopeCipher,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task.haltOn(phase?.signal);
  }

  /**
   * Expired results are unreadable already (load checks expires_at); the purge keeps the table from growing forever.
   * Its first pass comes at start-up, right after the cap: a replica restarted more often than every PURGE_EVERY_MS (a
   * deploy, a crash loop, a short-lived autoscaled one) would otherwise never delete what is past its retention.
   */
  onApplicationBootstrap(): void {
    // At once, not at the first purge: after RESULT_TTL_SECONDS was lowered, results kept under the longer retention
    // are already unreadable (load), and what reading one back costs (result_bytes, by expires_at) must say so too.
    this.capping = this.capToRetention(this.clock.now()).catch((err: unknown) => {
      this.log.warn({ err: loggableErrorText(err) }, 'results kept under a longer retention could not be brought to today\'s at start-up; the first purge does it');
      return 0;
    });
    // Not before the cap ends (the purge caps first too): no two passes over the same rows. A shutdown meanwhile stops
    // the task first, and a stopped task does not start.
    void this.capping.finally(() => this.task.start(0));
  }

  /** Waits for the statement in flight only: a pass over a large backlog (a lowered retention) stops between batches. */
  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await this.capping;
    await this.task.stop();
  }

  /** Brings the expiry of results stored under a longer RESULT_TTL_SECONDS than today's to today's; how many. */
  async capToRetention(now: Date, batch = PURGE_BATCH): Promise<number> {
    const ttl = this.config.RESULT_TTL_SECONDS;
    let total = 0;
    for (;;) {
      const [{ n }] = await this.sql.query<{ n: number }>(
        `WITH c AS (UPDATE tool_call_results r SET expires_at = r.created_at + make_interval(secs => $2)
                     WHERE r.tool_call_id IN (SELECT tool_call_id FROM tool_call_results
                                               WHERE expires_at > $1::timestamptz + make_interval(secs => $2)
                                                 AND created_at + make_interval(secs => $2) < expires_at LIMIT $3)
                    RETURNING 1)
         SELECT count(*)::int AS n FROM c`,
        [now, ttl, batch],
      );
      total += n;
      if (n < batch || this.stopping) return total;
    }
  }

  seal(orgId: string, toolCallId: string, json: string, now: Date): EncryptedResult {
    const env = this.cipher.encrypt(json, resultAad(orgId, toolCallId));
    return { ...env, sizeBytes: Buffer.byteLength(json), expiresAt: new Date(now.getTime() + this.config.RESULT_TTL_SECONDS * 1000) };
  }

  /** The stored result, `undefined` when none is stored or it has expired. */
  async load(orgId: string, toolCallId: string, now: Date): Promise<StoredResult> {
    const rows = await this.sql.prepared<{ key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer }>(
      // A row whose expiry lies beyond now + RESULT_TTL_SECONDS was stored under a longer retention (lowered
      // since): it lives RESULT_TTL_SECONDS from its writing, as the purge's cap also makes it.
      `SELECT key_id, iv, ciphertext, auth_tag FROM tool_call_results
        WHERE tool_call_id = $1 AND org_id = $2 AND expires_at > $3
          AND (expires_at <= $3::timestamptz + make_interval(secs => $4) OR created_at + make_interval(secs => $4) > $3)`,
      [toolCallId, orgId, now, this.config.RESULT_TTL_SECONDS],
    );
    if (rows.length === 0) return { found: false };
    const r = rows[0];
    try {
      const json = this.cipher.decrypt({ keyId: r.key_id, iv: r.iv, ciphertext: r.ciphertext, authTag: r.auth_tag }, resultAad(orgId, toolCallId));
      const text = json.toString('utf8');
      return { found: true, value: JSON.parse(text) as unknown, json: text };
    } catch (err) {
      // Under a master key no longer loaded (removed before rotation covered it), moved or damaged: the call
      // still succeeded, and its replay or pick-up says so instead of failing with a 500.
      if (!(err instanceof DecryptionError) && !(err instanceof SyntaxError)) throw err;
      this.log.warn({ toolCallId, keyId: r.key_id }, 'stored result cannot be read (no loaded master key opens it, or it is damaged)');
      return { found: false, unreadable: true };
    }
  }

  /**
   * In batches: one DELETE of a large backlog could outlast the statement timeout every time, and never catch up.
   * First, results stored under a longer RESULT_TTL_SECONDS than today's have their expiry brought forward to
   * today's retention from their writing: lowering the setting shortens what is already kept, not only what
   * comes (they hold unredacted vendor data). With the setting unchanged no expiry lies that far ahead, and
   * the index range is empty.
   */
  async purgeExpired(now: Date, batch = PURGE_BATCH): Promise<number> {
    await this.capToRetention(now, batch);
    if (this.stopping) return 0;
    let total = 0;
    for (;;) {
      const [{ n }] = await this.sql.query<{ n: number }>(
        `WITH d AS (DELETE FROM tool_call_results WHERE tool_call_id IN
                      (SELECT tool_call_id FROM tool_call_results WHERE expires_at <= $1 LIMIT $2) RETURNING 1)
         SELECT count(*)::int AS n FROM d`,
        [now, batch],
      );
      total += n;
      if (n < batch || this.stopping) return total;
    }
  }
}
