import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';

/** Which listing a cursor belongs to; a cursor of one listing is refused by another. */
export type CursorKind = 'tool-calls' | 'ledger-events' | 'approvals' | 'api-keys';

/** Where the next page starts: the last row's created_at (exact text, microseconds) and its tie-breaker. */
export interface CursorPosition {
  createdIso: string;
  /** tool-calls: the row id; ledger-events: the row seq */
  key: string;
}

interface CursorPayload {
  /** 2: signed under the master key `s` names; 1 (before key ids, no `s`): signed under the active key */
  v: 1 | 2;
  /** the id of the master key whose derived key signed it (v 2) */
  s?: string;
  k: CursorKind;
  /** the effective org scope: an org id, or '*' for a platform key listing every org */
  o: string;
  /** hash of the filter set */
  f: string;
  t: string;
  i: string;
}

/**
 * isoSql's text: years past 9999 have more digits, and a date before 1 AD ends in ' BC'. Or ±infinity, and a seq below
 * 0: a ledger event from before migration 1765200000000's NOT VALID checks keeps them, and a page ending on it must get
 * a cursor this codec takes back (it was refused, 400: the walk stopped there).
 */
const CREATED_ISO_RE = /^(?:\d{4,6}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z(?: BC)?|-?infinity)$/;
const KEY_RE = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|-?\d{1,19})$/;

/** The filter set a cursor is bound to: absent filters are left out, so the hash does not depend on spelling. */
export function filterHash(filters: Record<string, string | undefined>): string {
  const present = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined));
  return sha256Hex(canonicalJson(present)).slice(0, 32);
}

/** A signing key: derived from one master key (HKDF, info "cursor-v1"), never the master key itself. */
export function cursorKey(master: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'cursor-v1', 32));
}

const invalid = (): AppError => new AppError('VALIDATION_FAILED', 'cursor: invalid, or not from this query (same org and filters)');

/**
 * Opaque page cursors: base64url(JSON) + "." + base64url(HMAC-SHA256). The
 * signature covers the position, the org scope, the filter hash and the id of
 * the signing key, so a cursor cannot be edited to reach another org's rows,
 * reused with other filters, or pointed at another key. Cursors are signed under
 * the active master key and accepted under any loaded one: during a key switch
 * (a rolling restart with both keys loaded) replicas with different active keys
 * take each other's cursors, and one issued before the switch keeps working
 * while its key is loaded. A key no longer loaded, an unknown key id or a bad
 * signature is refused like any other bad cursor (the caller starts again from
 * the first page). Cursors from before key ids (v 1) are still taken if they
 * verify under the active key, as they were then.
 */
@Injectable()
export class LedgerCursorCodec {
  private readonly activeKeyId: string;
  /** signing key by master key id, for every loaded key */
  private readonly keys = new Map<string, Buffer>();

  constructor(@Inject(APP_CONFIG) config: Pick<AppConfig, 'keyring'>) {
    const { activeKeyId, keys } = config.keyring;
    for (const [id, master] of keys) this.keys.set(id, cursorKey(master));
    if (!this.keys.has(activeKeyId)) throw new Error('active master key is not loaded');
    this.activeKeyId = activeKeyId;
  }

  encode(kind: CursorKind, scope: string, filters: string, pos: CursorPosition): string {
    const payload: CursorPayload = { v: 2, s: this.activeKeyId, k: kind, o: scope, f: filters, t: pos.createdIso, i: pos.key };
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.mac(this.activeKeyId, `cursor-v2.${body}`)}`;
  }

  /** The position, if the cursor is genuine and was issued for this listing, scope and filter set; else 400. */
  decode(cursor: string, kind: CursorKind, scope: string, filters: string): CursorPosition {
    const parts = cursor.split('.');
    if (parts.length !== 2 || !parts[0] || !parts[1]) throw invalid();
    const [body, mac] = parts;
    // Read before the signature is checked, only to learn which key to check it with: nothing in it is trusted until then.
    let p: Partial<CursorPayload>;
    try {
      p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<CursorPayload>;
    } catch {
      throw invalid();
    }
    if (typeof p !== 'object' || p === null) throw invalid();
    let expected: string;
    if (p.v === 2 && typeof p.s === 'string' && this.keys.has(p.s)) expected = this.mac(p.s, `cursor-v2.${body}`);
    else if (p.v === 1 && p.s === undefined) expected = this.mac(this.activeKeyId, `cursor-v1.${body}`);
    else throw invalid();
    // Compared as text, so no second spelling of the same signature bytes is accepted either.
    const given = Buffer.from(mac);
    if (given.length !== Buffer.byteLength(expected) || !timingSafeEqual(given, Buffer.from(expected))) throw invalid();
    if (p.k !== kind || p.o !== scope || p.f !== filters) throw invalid();
    if (typeof p.t !== 'string' || !CREATED_ISO_RE.test(p.t) || typeof p.i !== 'string' || !KEY_RE.test(p.i)) throw invalid();
    return { createdIso: p.t, key: p.i };
  }

  private mac(keyId: string, signed: string): string {
    return createHmac('sha256', this.keys.get(keyId)!).update(signed).digest('base64url');
  }
}
