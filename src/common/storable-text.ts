/**
 * PostgreSQL `text` cannot hold NUL, and `jsonb` refuses NUL and unpaired
 * UTF-16 surrogates. Both are valid in a JSON request, so text that reaches
 * a column must be checked (admin input: refuse it) or repaired (model input
 * we record as faithfully as the database allows).
 */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNPAIRED_SURROGATES = new RegExp(UNPAIRED_SURROGATE.source, 'g');

export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && !UNPAIRED_SURROGATE.test(text);
}

/**
 * NUL and unpaired surrogates replaced by U+FFFD. Replaced rather than
 * dropped: "look\u0000up" must not be recorded as the real action "lookup".
 */
export function storableText(text: string): string {
  if (isStorableText(text)) return text;
  return text.replaceAll('\u0000', '\uFFFD').replace(UNPAIRED_SURROGATES, '\uFFFD');
}

/** The first key or string inside a parsed JSON value that could not be stored, if any. */
export function findUnstorableText(value: unknown): string | undefined {
  return findText(value, (text) => !isStorableText(text));
}

/**
 * A key or string inside a parsed JSON value that `test` holds for, if any (iterative: no recursion to blow). Not in
 * document order: it answers whether there is one, and which.
 */
export function findText(value: unknown, test: (text: string) => boolean): string | undefined {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (test(v)) return v;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        if (test(k)) return k;
        stack.push(item);
      }
    }
  }
  return undefined;
}

/**
 * How many characters PostgreSQL prints for a finite number stored in jsonb. jsonb keeps a number
 * as an exact decimal and prints every digit: 1e308 (6 characters of JSON) comes back as 309, and
 * 5e-324 as 326. String(value) is the text JSON.stringify sends; its exponent is written out here.
 */
export function jsonbNumberLength(value: number): number {
  const text = String(value);
  const e = text.indexOf('e');
  if (e < 0) return text.length;
  const sign = text.startsWith('-') ? 1 : 0;
  const dot = text.indexOf('.');
  const whole = (dot < 0 ? e : dot) - sign;
  const digits = dot < 0 ? whole : e - sign - 1;
  const point = whole + Number(text.slice(e + 1));
  if (point <= 0) return sign + 2 - point + digits; // 0.000ddd
  if (point >= digits) return sign + point; // ddd000
  return sign + digits + 1; // ddd.ddd
}
