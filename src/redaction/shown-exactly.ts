/**
 * Whether a recorded (redacted) value is the value itself: every member kept, every text and number as written.
 * False when redaction hid anything ([REDACTED]), cut anything ([Truncated], past its bounds) or replaced anything
 * (NUL and unpaired surrogates shown as U+FFFD). A marker the caller wrote as text is the value itself, so it holds:
 * this answer, not the markers, tells an approver whether the input shown is the input that runs.
 */
export function shownExactly(value: unknown, recorded: unknown): boolean {
  if (value === recorded) return true;
  if (typeof value === 'number' && typeof recorded === 'number') return Object.is(value, recorded) || (value === 0 && recorded === 0);
  if (value === null || recorded === null || typeof value !== 'object' || typeof recorded !== 'object') return false;
  if (Array.isArray(value) !== Array.isArray(recorded)) return false;
  if (Array.isArray(value)) {
    const list = recorded as unknown[];
    return value.length === list.length && value.every((item, i) => shownExactly(item, list[i]));
  }
  const a = Object.keys(value);
  const b = Object.keys(recorded);
  if (a.length !== b.length) return false;
  const rec = recorded as Record<string, unknown>;
  return a.every((k) => Object.hasOwn(rec, k) && shownExactly((value as Record<string, unknown>)[k], rec[k]));
}
