import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, existsSync, linkSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { makeDataDir, untrustedDataDir } from '../common/data-dir.js';
import { userStartupOptions } from '../db/database-url.js';
import { ConfigError, parseRawConfigCollecting, type RawConfig } from './config.schema.js';

export interface MasterKeyring {
  activeKeyId: string;
  keys: ReadonlyMap<string, Buffer>;
}

export interface AppConfig extends Omit<RawConfig, 'MASTER_ENCRYPTION_KEY' | 'MASTER_ENCRYPTION_KEYS' | 'MASTER_ENCRYPTION_ACTIVE_KEY_ID'> {
  keyring: MasterKeyring;
  /** Non-fatal notes for the operator (never contain secrets). */
  warnings: string[];
}

export const APP_CONFIG = Symbol('APP_CONFIG');

const KEY_ID_RE = /^[A-Za-z0-9_-]{1,32}$/;

/** `source`: where the key came from, for the message (the variable, or the development key file). */
function decodeKey(source: string, b64: string, problems: string[]): Buffer | undefined {
  const buf = Buffer.from(b64.trim(), 'base64');
  // Reject anything that does not round-trip: base64 decoding is lenient and
  // would silently accept a truncated or mistyped key.
  if (buf.length !== 32 || buf.toString('base64').replace(/=+$/, '') !== b64.trim().replace(/=+$/, '')) {
    problems.push(`${source} must be the base64 encoding of exactly 32 bytes`);
    return undefined;
  }
  return buf;
}

export function resolveKeyring(raw: RawConfig, problems: string[], warnings: string[]): MasterKeyring {
  const keys = new Map<string, Buffer>();
  if (raw.MASTER_ENCRYPTION_KEYS) {
    const before = problems.length;
    for (const part of raw.MASTER_ENCRYPTION_KEYS.split(',').map((p) => p.trim()).filter(Boolean)) {
      const idx = part.indexOf(':');
      const id = idx > 0 ? part.slice(0, idx) : '';
      if (!KEY_ID_RE.test(id)) {
        problems.push('MASTER_ENCRYPTION_KEYS entries must look like <keyId>:<base64>');
        continue;
      }
      if (keys.has(id)) problems.push(`MASTER_ENCRYPTION_KEYS lists key id "${id}" twice`);
      const key = decodeKey(`MASTER_ENCRYPTION_KEYS entry "${id}"`, part.slice(idx + 1), problems);
      // One key under two ids is a copy-paste slip (the old key pasted for the new): a "rotation" to it would relabel
      // every row and report done while the key being retired still opens them all (credentials-rotate refuses to
      // rotate to such a key). Said, not refused: a deployment already running so has rows under both ids, and needs
      // both loaded until a rotation to a key of its own. Named by id, never shown.
      const twin = key ? [...keys].find(([, other]) => other.equals(key))?.[0] : undefined;
      if (twin !== undefined && twin !== id) {
        warnings.push(`MASTER_ENCRYPTION_KEYS gives key ids "${twin}" and "${id}" the same key: each id should name its own key (rotate to a new key under a new id)`);
      }
      if (key) keys.set(id, key);
    }
    // With several keys, which one encrypts new data is chosen, never guessed: defaulting to the first listed would
    // make a key active in the same rolling restart that loads it, which the README's rotation steps warn breaks
    // the replicas still on the old key alone (what the credentials-rotate CLI refuses too).
    if (keys.size > 1 && !raw.MASTER_ENCRYPTION_ACTIVE_KEY_ID) {
      problems.push('MASTER_ENCRYPTION_ACTIVE_KEY_ID is required when MASTER_ENCRYPTION_KEYS lists more than one key: name the key that encrypts new data');
    }
    const active = raw.MASTER_ENCRYPTION_ACTIVE_KEY_ID ?? [...keys.keys()][0];
    // " " or "," would otherwise start a service that cannot encrypt or decrypt anything.
    if (keys.size === 0 && problems.length === before) problems.push('MASTER_ENCRYPTION_KEYS lists no key: give at least one <keyId>:<base64>');
    if (raw.MASTER_ENCRYPTION_KEY) problems.push('set MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS, not both');
    // Quoted only when it looks like a key id: a whole entry (`k2:<base64>`) pasted in by mistake is a key.
    if (active && !KEY_ID_RE.test(active)) problems.push('MASTER_ENCRYPTION_ACTIVE_KEY_ID must be a key id listed in MASTER_ENCRYPTION_KEYS (like k2), not an entry or a key');
    else if (active && !keys.has(active)) problems.push(`MASTER_ENCRYPTION_ACTIVE_KEY_ID "${active}" is not in MASTER_ENCRYPTION_KEYS`);
    return { activeKeyId: active ?? 'k1', keys };
  }
  if (raw.MASTER_ENCRYPTION_KEY) {
    const key = decodeKey('MASTER_ENCRYPTION_KEY', raw.MASTER_ENCRYPTION_KEY, problems);
    if (key) keys.set('k1', key);
    if (raw.MASTER_ENCRYPTION_ACTIVE_KEY_ID && raw.MASTER_ENCRYPTION_ACTIVE_KEY_ID !== 'k1') {
      problems.push('MASTER_ENCRYPTION_ACTIVE_KEY_ID must be k1 (or unset) with MASTER_ENCRYPTION_KEY');
    }
    return { activeKeyId: 'k1', keys };
  }
  if (raw.NODE_ENV === 'production') {
    problems.push('MASTER_ENCRYPTION_KEY is required when NODE_ENV=production');
    return { activeKeyId: 'k1', keys };
  }
  // Development convenience: one key generated once and kept beside the
  // embedded database, so credentials survive restarts.
  const file = resolve(raw.DATA_DIR, 'master.key');
  // A start already refused creates nothing (a start that does not happen), but its list still names DATA_DIR if the
  // key file could not be made there.
  const unusable = (why: string) =>
    `DATA_DIR: the development key file ${file} cannot be created or read (${why}); set MASTER_ENCRYPTION_KEY, or a DATA_DIR the gateway can write`;
  if (problems.length && !existsSync(file)) {
    const why = unwritableDir(dirname(file));
    if (why) problems.push(unusable(why));
    return { activeKeyId: 'k1', keys };
  }
  let text: string;
  try {
    if (!existsSync(file)) createOnce(file, randomBytes(32).toString('base64') + '\n');
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    problems.push(unusable((err as NodeJS.ErrnoException).code ?? 'unknown error'));
    return { activeKeyId: 'k1', keys };
  }
  const key = decodeKey(`the development key file ${file} (MASTER_ENCRYPTION_KEY is not set)`, text, problems);
  if (key) keys.set('k1', key);
  warnings.push(`MASTER_ENCRYPTION_KEY is not set: using a development key kept in ${join(raw.DATA_DIR, 'master.key')}; set it in production`);
  return { activeKeyId: 'k1', keys };
}

/** Why `dir` cannot be created or written (its nearest existing ancestor is a file, or not writable); undefined if it can. */
function unwritableDir(dir: string): string | undefined {
  let at = dir;
  while (!existsSync(at)) {
    const up = dirname(at);
    if (up === at) return undefined;
    at = up;
  }
  if (!statSync(at).isDirectory()) return 'ENOTDIR';
  try {
    accessSync(at, constants.W_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'not writable';
  }
}

/**
 * Creates `file` with `content` unless it exists, atomically: the content is
 * written to a private temporary file and hard-linked into place, which fails
 * if another process got there first. Two gateways starting together on one
 * DATA_DIR then both use the first key written, never each their own (the
 * loser would encrypt credentials the other cannot read), and no process ever
 * reads a half-written key.
 */
function createOnce(file: string, content: string): void {
  makeDataDir(dirname(file));
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    // Inside the try: a write cut short (a full disk, a file-size limit: EFBIG) leaves no part of the key behind.
    writeFileSync(tmp, content, { mode: 0o600, flag: 'wx' });
    chmodSync(tmp, 0o600);
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Parses and validates the environment once; throws ConfigError listing every problem. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const { raw, problems } = parseRawConfigCollecting(env);
  const warnings: string[] = [];
  // NODE_ENV may itself be invalid; judge the keys as production would (strictest).
  const devKey = !raw.MASTER_ENCRYPTION_KEY && !raw.MASTER_ENCRYPTION_KEYS && (raw.NODE_ENV ?? 'production') !== 'production';
  // Before the development key is read from it: a folder whose secrets another user could have planted is refused.
  const untrusted = raw.DATA_DIR && (devKey || !raw.DATABASE_URL) ? untrustedDataDir(resolve(raw.DATA_DIR)) : undefined;
  if (untrusted) problems.push(`DATA_DIR: ${untrusted}`);
  const keyring = untrusted ? { activeKeyId: 'k1', keys: new Map<string, Buffer>() } : resolveKeyring(raw.NODE_ENV ? raw : { ...raw, NODE_ENV: 'production' }, problems, warnings);
  // Again once the development key may have made the folder: one another user made in between is refused too.
  const madeMeanwhile = !untrusted && devKey && raw.DATA_DIR ? untrustedDataDir(resolve(raw.DATA_DIR)) : undefined;
  if (madeMeanwhile) problems.push(`DATA_DIR: ${madeMeanwhile}`);
  if (problems.length) throw new ConfigError(problems);
  if (raw.DB_CONNECTION_MODE === 'pooled' && !raw.DATABASE_URL) {
    // Nothing stands between the gateway and its embedded database: connected to directly, the settings sent.
    warnings.push('DB_CONNECTION_MODE=pooled is for a DATABASE_URL behind a connection pooler: the embedded database is connected to directly, with the settings sent at connect');
    raw.DB_CONNECTION_MODE = 'direct';
  }
  const own = raw.DB_CONNECTION_MODE === 'pooled' && raw.DATABASE_URL ? userStartupOptions(raw.DATABASE_URL, env) : null;
  if (own) {
    // The driver sends them whatever the mode: they are the user's own. Said here, as a pooler refusing them says only
    // "unsupported startup parameter: options".
    warnings.push(
      `DB_CONNECTION_MODE=pooled, but ${own.from === 'url' ? "DATABASE_URL's options parameter" : 'PGOPTIONS'} is set: it is still sent, as the startup ` +
        "parameter `options`, which RDS Proxy, Neon's pooler and a PgBouncer without it in ignore_startup_parameters refuse",
    );
  }
  warnings.push(...implausibleDurations(raw));
  const { MASTER_ENCRYPTION_KEY: _a, MASTER_ENCRYPTION_KEYS: _b, MASTER_ENCRYPTION_ACTIVE_KEY_ID: _c, ...rest } = raw;
  return { ...rest, keyring, warnings };
}

/**
 * Durations in milliseconds that start up but cannot work, most often seconds written where milliseconds are read
 * (VENDOR_TIMEOUT_MS=60): said at start-up, not refused, since tests and drills use short ones on purpose.
 */
function implausibleDurations(
  raw: Pick<AppConfig, 'VENDOR_TIMEOUT_MS' | 'VENDOR_CONNECT_TIMEOUT_MS' | 'CIRCUIT_BREAKER_COOLDOWN_MS' | 'SHUTDOWN_DELAY_MS' | 'STALE_RUNNING_MARGIN_MS'>,
): string[] {
  const out: string[] = [];
  const seconds = (name: string, value: number, what: string) =>
    out.push(`${name}=${value} is ${value} milliseconds${what}: milliseconds, not seconds (did you mean ${value * 1000}?)`);
  if (raw.VENDOR_TIMEOUT_MS < 1_000) seconds('VENDOR_TIMEOUT_MS', raw.VENDOR_TIMEOUT_MS, ' for a whole vendor call, its connection and TLS handshake included');
  // Under 100 ms (a vendor on the same network answers within a few): DNS, TCP and TLS to a remote vendor take longer.
  if (raw.VENDOR_CONNECT_TIMEOUT_MS < 100) seconds('VENDOR_CONNECT_TIMEOUT_MS', raw.VENDOR_CONNECT_TIMEOUT_MS, ' for DNS, the connection and its TLS handshake');
  if (raw.CIRCUIT_BREAKER_COOLDOWN_MS < 1_000) seconds('CIRCUIT_BREAKER_COOLDOWN_MS', raw.CIRCUIT_BREAKER_COOLDOWN_MS, ' of an open breaker: it barely holds a failing vendor off');
  if (raw.SHUTDOWN_DELAY_MS > 0 && raw.SHUTDOWN_DELAY_MS < 1_000) seconds('SHUTDOWN_DELAY_MS', raw.SHUTDOWN_DELAY_MS, ' of /readyz 503 before the drain: no load balancer sees it');
  if (raw.STALE_RUNNING_MARGIN_MS < STALE_MARGIN_FLOOR_MS) {
    out.push(
      `STALE_RUNNING_MARGIN_MS=${raw.STALE_RUNNING_MARGIN_MS}: a call's outcome is written up to a few seconds after its VENDOR_TIMEOUT_MS ` +
        `(its write retried through a database blip), so below ${STALE_MARGIN_FLOOR_MS} the orphan sweep can take a call still finishing ` +
        'for a crashed one and record it indeterminate',
    );
  }
  return out;
}

/** The outcome write's inline retries (OUTCOME_WRITE_INLINE_MS, 3 s) and the time before a call's budget starts, with room. */
const STALE_MARGIN_FLOOR_MS = 10_000;
