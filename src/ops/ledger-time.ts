import { AppError } from '../common/errors/app-error.js';

const ISO_RE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?(\d*))?(Z|[+-]\d{2}:\d{2})?)?$/;

/**
 * A query timestamp (`since`, `until`, `from`, `to`) checked strictly and
 * returned as text PostgreSQL parses exactly (microseconds kept, never through
 * a JS Date). A date alone means midnight UTC; a time without a zone means UTC.
 * Anything else is 400, never a database error.
 */
export function parseQueryTimestamp(field: string, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  // A "+" sent unescaped in a query (`since=2026-01-01T00:00:00+02:00`) arrives as a space: at the zone's place
  // no space can be anything else. East of UTC, a timestamp typed as documented was a 400.
  const m = ISO_RE.exec(raw.replace(/(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:\d{2})$/, '$1+$2'));
  const bad = (): AppError => new AppError('VALIDATION_FAILED', `${field}: must be an ISO-8601 timestamp such as 2026-01-31T12:00:00Z`);
  if (!m) throw bad();
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', finer = '', zone = 'Z'] = m;
  if (finer !== '' && frac === '') throw bad(); // digits with no point before them
  const text = `${y}-${mo}-${d}T${h}:${mi}:${s}${frac}${zone}`;
  const date = new Date(`${y}-${mo}-${d}T${h}:${mi}:${s}Z`);
  // Date rolls 2026-02-30 over to March: a round trip catches impossible dates and times.
  if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 19) !== `${y}-${mo}-${d}T${h}:${mi}:${s}`) throw bad();
  if (zone !== 'Z' && (Number(zone.slice(1, 3)) > 15 || Number(zone.slice(4, 6)) > 59)) throw bad();
  // JavaScript has a year 0; PostgreSQL does not (1 BC precedes AD 1) and refuses it, so it is a 400 here, not a 500 there.
  if (y === '0000') throw bad();
  // RFC 3339 allows any number of fractional digits (Go's RFC3339Nano and Java's Instant send 9). Rows are kept to
  // the microsecond, so a finer instant is the next microsecond up: `since` (>=) and `until` (<) then select
  // exactly the rows they would at full precision.
  if (!/[1-9]/.test(finer)) return text;
  const up = microsText(epochMicros(text) + 1n);
  // Not before year 1 (JavaScript writes year 0 as 0000, which PostgreSQL refuses). Past 9999 it is the next instant
  // all the same, as PostgreSQL reads it (10000-01-01…): an "end of time" bound such as .NET's DateTime.MaxValue
  // (9999-12-31T23:59:59.9999999Z) or a nanosecond clock's selects every row, as the same bound in microseconds does.
  if (up.startsWith('0000') || up.startsWith('-')) throw bad();
  return up;
}

/**
 * Microseconds since the epoch as UTC text parseQueryTimestamp could have returned. A year past 9999 is written as
 * PostgreSQL reads it (10000-…), not as JavaScript's expanded year (+010000-…).
 */
function microsText(micros: bigint): string {
  const ms = micros >= 0n ? micros / 1000n : (micros - 999n) / 1000n; // floor, before 1970 too
  const iso = new Date(Number(ms)).toISOString().replace(/^\+0*(\d{5,})/, '$1');
  return `${iso.slice(0, -1)}${String(micros - ms * 1000n).padStart(3, '0')}Z`;
}

/** A timestamp as parseQueryTimestamp returns it, in microseconds since the epoch (exact: no float). */
function epochMicros(text: string): bigint {
  const m = /^(\d{4,6})(-.{14})(?:\.(\d{1,6}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) throw new Error(`not a parsed query timestamp: ${text}`);
  const year = m[1].length > 4 ? `+${m[1].padStart(6, '0')}` : m[1]; // JavaScript's expanded year
  return BigInt(Date.parse(`${year}${m[2]}${m[4]}`)) * 1000n + BigInt((m[3] ?? '').padEnd(6, '0'));
}

/**
 * A time window whose start is after its end is a 400, not an empty answer: bounds swapped by mistake would
 * otherwise read as "no activity". Equal bounds are an empty window, as asked. Both as parseQueryTimestamp returns them.
 */
export function assertTimeWindow(startField: string, start: string | undefined, endField: string, end: string | undefined): void {
  if (start === undefined || end === undefined) return;
  if (epochMicros(start) > epochMicros(end)) {
    throw new AppError('VALIDATION_FAILED', `${startField}: must not be after ${endField} (the window is ${startField} <= created_at < ${endField})`);
  }
}
