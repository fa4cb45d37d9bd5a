import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig, type MasterKeyring } from '../config/app-config.js';

/** Which listing a cursor belongs to; a cursor of one listing is refused by another. */
export type CursorKind = 'tool-calls' | 'ledger-events' | 'approvals' | 'api-keys';

/** Where the next page starts: the last row's created_at (exact text, microseconds) and its tie-breaker. */
export interface CursorPosition {
  createdIso: string;
  /** tool-calls: the row id; ledger-events: the row seq */
  key: string;
}

interface CursorPayload {
  v: 1;
  k: CursorKind;
  /** the effective org scope: an org id, or '*' for a platform key listing every org */
  o: string;
  /** hash of the filter set */
  f: string;
  t: string;
  i: string;
}

const CREATED_ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const KEY_RE = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{1,19})$/;

/** The filter set a cursor is bound to: absent filters are left out, so the hash does not depend on spelling. */
export function filterHash(filters: Record<string, string | undefined>): string {
  const present = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined));
  return sha256Hex(canonicalJson(present)).slice(0, 32);
}

/** The signing key: derived from the active master key (HKDF, info "cursor-v1"), never the master key itself. */
export function cursorKey(keyring: MasterKeyring): Buffer {
  const master = keyring.keys.get(keyring.activeKeyId);
  if (!master) throw new Error('active master key is not loaded');
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'cursor-v1', 32));
}

const invalid = (): AppError => new AppError('VALIDATION_FAILED', 'cursor: invalid, or not from this query (same org and filters)');

/**
 * Opaque page cursors: base64url(JSON) + "." + base64url(HMAC-SHA256). The
 * signature covers the position, the org scope and the filter hash, so a
 * cursor cannot be edited to reach another org's rows or reused with other
 * filters. A cursor signed under a key that is no longer active is refused
 * like any other bad cursor (the caller starts again from the first page).
 */
@Injectable()
export class LedgerCursorCodec {
  private readonly key: Buffer;

  constructor(@Inject(APP_CONFIG) config: Pick<AppConfig, 'keyring'>) {
    this.key = cursorKey(config.keyring);
  }

  encode(kind: CursorKind, scope: string, filters: string, pos: CursorPosition): string {
    const payload: CursorPayload = { v: 1, k: kind, o: scope, f: filters, t: pos.createdIso, i: pos.key };
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.sign(body).toString('base64url')}`;
  }

  /** The position, if the cursor is genuine and was issued for this listing, scope and filter set; else 400. */
  decode(cursor: string, kind: CursorKind, scope: string, filters: string): CursorPosition {
    const dot = cursor.indexOf('.');
    if (dot <= 0) throw invalid();
    const body = cursor.slice(0, dot);
    // Compared as text, so no second spelling of the same signature bytes is accepted either.
    const mac = Buffer.from(cursor.slice(dot + 1));
    const expected = Buffer.from(this.sign(body).toString('base64url'));
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) throw invalid();
    let p: Partial<CursorPayload>;
    try {
      p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<CursorPayload>;
    } catch {
      throw invalid();
    }
    if (p.v !== 1 || p.k !== kind || p.o !== scope || p.f !== filters) throw invalid();
    if (typeof p.t !== 'string' || !CREATED_ISO_RE.test(p.t) || typeof p.i !== 'string' || !KEY_RE.test(p.i)) throw invalid();
    return { createdIso: p.t, key: p.i };
  }

  private sign(body: string): Buffer {
    return createHmac('sha256', this.key).update(`cursor-v1.${body}`).digest();
  }
}
