/**
 * How long a vendor asked us to wait: Retry-After in either of its forms (RFC 9110 §10.2.3), and the line
 * between a wait the vendor named and the gateway's own default for an answer that named none.
 */
import type { FailedOutcome } from '../vendor-handler.js';

const SECONDS = /^\d+(\.\d+)?$/;

/** Retry-After → ms. Seconds may be fractional ("2.0", Shopify); an HTTP date is relative to `now`. */
export function parseRetryAfterMs(value: string | undefined, now: number = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '') return undefined;
  if (SECONDS.test(v)) return clampRetryAfterMs(Math.ceil(Number(v) * 1000));
  const at = parseHttpDate(v, now);
  if (at === undefined) return undefined;
  return clampRetryAfterMs(Math.max(0, at - now));
}

/**
 * The wait a vendor's answer names (its Retry-After). A date is read against the answer's own Date header, the
 * vendor's clock, when it has one: "retry at 10:00:30" sent at 10:00:00 means 30 s, though this host's clock be minutes
 * ahead (read as no wait: the retry hammers a rate-limited vendor) or behind (minutes of needless wait).
 */
export function retryAfterMsOf(headers: Readonly<Record<string, string | undefined>>): number | undefined {
  const sentAt = headers.date === undefined ? undefined : parseHttpDate(headers.date.trim());
  return parseRetryAfterMs(headers['retry-after'], sentAt ?? Date.now());
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^[A-Za-z]{3}, (\d{1,2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850_DATE = /^[A-Za-z]{6,9}, (\d{1,2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME_DATE = /^[A-Za-z]{3} ([A-Za-z]{3}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * An HTTP-date as ms since the epoch, in any of the three forms a recipient must accept (RFC 9110 §5.6.7):
 * IMF-fixdate, the obsolete RFC 850 form and asctime. All are UTC, asctime too although it names no zone
 * (Date.parse would read it in the server's local time). Anything else, a date that does not exist included,
 * is undefined: Date.parse also takes numbers and odd strings, which no vendor means as a date.
 */
export function parseHttpDate(value: string, now: number = Date.now()): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return utc(Number(m[3]), m[2], m[1], m[4], m[5], m[6]);
  m = RFC850_DATE.exec(value);
  if (m) return utc(fullYear(Number(m[3]), now), m[2], m[1], m[4], m[5], m[6]);
  m = ASCTIME_DATE.exec(value);
  if (m) return utc(Number(m[6]), m[1], m[2], m[3], m[4], m[5]);
  return undefined;
}

/** RFC 850's two-digit year: this century's, unless that is more than 50 years ahead, then the last century's. */
function fullYear(twoDigits: number, now: number): number {
  const thisYear = new Date(now).getUTCFullYear();
  const year = thisYear - (thisYear % 100) + twoDigits;
  return year > thisYear + 50 ? year - 100 : year;
}

function utc(year: number, monthName: string, day: string, hour: string, minute: string, second: string): number | undefined {
  const month = MONTHS.indexOf(monthName);
  const [d, h, mi, s] = [Number(day), Number(hour), Number(minute), Number(second)];
  if (month < 0 || h > 23 || mi > 59 || s > 60) return undefined;
  // Date.UTC rolls 31 Feb over into March: a day the month does not have is no date.
  if (new Date(Date.UTC(year, month, d)).getUTCDate() !== d) return undefined;
  return Date.UTC(year, month, d, h, mi, s);
}

/** The longest wait the gateway reports or honours: a day. "99999999999" or a date in 9999 mean "not now", not a number to store. */
export const MAX_RETRY_AFTER_MS = 86_400_000;

/** A wait in ms, finite and at most a day (undefined stays undefined: no wait was given). */
export function clampRetryAfterMs(ms: number | undefined): number | undefined {
  if (ms === undefined || Number.isNaN(ms)) return undefined;
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}

/** `outcome` with the wait the vendor named, else with `defaultMs` marked as the gateway's default. */
export function withWait(outcome: FailedOutcome, namedMs: number | undefined, defaultMs: number): FailedOutcome {
  if (namedMs !== undefined) return { ...outcome, retryAfterMs: namedMs };
  return { ...outcome, retryAfterMs: defaultMs, retryAfterIsDefault: true };
}

/** The wait the vendor itself named for this failure, if it named one. */
export function vendorNamedWaitMs(f: FailedOutcome): number | undefined {
  return f.retryAfterIsDefault ? undefined : f.retryAfterMs;
}
