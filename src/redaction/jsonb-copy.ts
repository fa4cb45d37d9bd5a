import { jsonbNumberLength } from '../common/storable-text.js';

/** 8 for an ordinary number, as many characters as PostgreSQL prints for a longer one (an id of up to 8 digits takes no String()). */
export function numberCost(value: number): number {
  return Number.isInteger(value) && value > -1e7 && value < 1e8 ? 8 : Math.max(8, jsonbNumberLength(value));
}

/** Own data property even for "__proto__": plain assignment would set the prototype instead. */
export function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The names members of one object are recorded under. A name recorded as sent is its own; one the copy
 * changed (NUL replaced, a secret redacted, a cut) never takes a name another member has or was sent
 * under: two members never collapse into one, and no name shows a value the vendor gets under another
 * ("amou\u0000nt" recorded as "amount" would hide the real amount). A clash gets " (2)", " (3)", ….
 */
export class RecordedNames {
  // Built on the first changed name only: most objects have none.
  private sent?: Set<string>;
  private next?: Map<string, number>;

  constructor(
    private readonly keys: readonly string[],
    private readonly out: Record<string, unknown>,
  ) {}

  of(rawKey: string, recorded: string): string {
    return recorded === rawKey ? recorded : this.unique(recorded);
  }

  unique(name: string): string {
    this.sent ??= new Set(this.keys);
    this.next ??= new Map();
    let n = this.next.get(name) ?? 1;
    let candidate = name;
    while (this.sent.has(candidate) || Object.hasOwn(this.out, candidate)) candidate = `${name} (${++n})`;
    this.next.set(name, n);
    return candidate;
  }
}

/** PostgreSQL jsonb rejects \u0000 in text; redaction matches on text without it. */
export function stripNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
}

/** jsonb also rejects unpaired surrogates (and a cut can split a pair): replace them with U+FFFD. */
export function toWellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}
