/**
 * A timestamp read from PostgreSQL as text for an answer: ISO 8601 (UTC, milliseconds), or `infinity` / `-infinity`.
 *
 * The gateway never writes an infinite time, and the mutable tables refuse one (migrations 1765200000000,
 * 1766400000000), but the ledger and policy decisions are append-only: a row written around the gateway before their
 * CHECKs keeps its value, and verify reports it. pg reads ±infinity as the number ±Infinity (an invalid date), whose
 * toISOString() throws: every answer holding such a row was a 500. PostgreSQL's own spelling is kept instead.
 */
export function timeText(at: Date | number): string {
  if (at instanceof Date && !Number.isNaN(at.getTime())) return at.toISOString();
  if (at === Infinity) return 'infinity';
  if (at === -Infinity) return '-infinity';
  return 'invalid';
}
