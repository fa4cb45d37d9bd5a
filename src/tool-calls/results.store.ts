import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EnvelopeCipher, type Envelope } from '../common/crypto/envelope-cipher.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';

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
@Injectable()
export class ResultsStore {
  constructor(
    private readonly ds: DataSource,
    private readonly sql: Sql,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  seal(orgId: string, toolCallId: string, json: string, now: Date): EncryptedResult {
    const env = this.cipher.encrypt(json, resultAad(orgId, toolCallId));
    return { ...env, sizeBytes: Buffer.byteLength(json), expiresAt: new Date(now.getTime() + this.config.RESULT_TTL_SECONDS * 1000) };
  }

  /** The stored result, `undefined` when none is stored or it has expired. */
  async load(orgId: string, toolCallId: string, now: Date): Promise<{ found: true; value: unknown } | { found: false }> {
    const rows = await this.sql.prepared<{ key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer }>(
      'SELECT key_id, iv, ciphertext, auth_tag FROM tool_call_results WHERE tool_call_id = $1 AND org_id = $2 AND expires_at > $3',
      [toolCallId, orgId, now],
    );
    if (rows.length === 0) return { found: false };
    const r = rows[0];
    const json = this.cipher.decrypt({ keyId: r.key_id, iv: r.iv, ciphertext: r.ciphertext, authTag: r.auth_tag }, resultAad(orgId, toolCallId));
    return { found: true, value: JSON.parse(json.toString('utf8')) as unknown };
  }

  async purgeExpired(now: Date): Promise<number> {
    const res = (await this.ds.query('DELETE FROM tool_call_results WHERE expires_at <= $1', [now])) as [unknown[], number];
    return res[1] ?? 0;
  }
}
