/**
 * JSON number literals a double does not hold: an integer beyond 2^53 (a 64-bit id), 1e400, 1e-400. JSON.parse
 * gives another number for each (12345678901234567891 → 12345678901234567000, Infinity written back as null, 0).
 */

/**
 * True when a number literal of a (valid) JSON text is not the number its double writes back. A literal of at
 * most 15 significant digits comes back the same (a double holds 15 decimal digits) unless it is out of range,
 * so only longer ones, ones with an exponent and very long ones are parsed again: a body of many numbers costs no
 * more than one more pass.
 */
export function hasRoundedLiteral(text: string, from = 0, to = text.length): boolean {
  return inexactLiterals(text, from, to, true).length > 0;
}

/**
 * A vendor's JSON answer, parsed, with every number literal a double would change kept as the vendor wrote it, as
 * a string: `{"id":12345678901234567891}` is read `{id: "12345678901234567891"}`, not as another id. The model, the
 * stored result and the ledger then show the vendor's own digits (json-bigint's storeAsString). A text of numbers
 * that all parse exactly (every answer of the vendors we know) costs what the request check costs (unrepresentableNumber):
 * one more pass over it, and only when it holds a number at all.
 */
export function parseJsonKeepingNumbers(text: string): unknown {
  const value = JSON.parse(text) as unknown;
  if (unrepresentableNumber(value, text) === undefined) return value;
  const spans = inexactLiterals(text, 0, text.length, false);
  let quoted = '';
  let at = 0;
  for (const [start, end] of spans) {
    quoted += `${text.slice(at, start)}"${text.slice(start, end)}"`;
    at = end;
  }
  return JSON.parse(quoted + text.slice(at)) as unknown;
}

/**
 * What JSON.parse lost of a body's numbers: 'infinite' when a value is ±Infinity, 'rounded' when a literal
 * does not come back from its double as the same number: an integer beyond 2^53 (1234567890123456789 is written
 * on as 1234567890123456800), a decimal of more digits than a double holds (1.000000000000000001 as 1), a
 * non-zero one below its range (1e-400 as 0). One that does (1e308, 9007199254740992, 6.02214076e23,
 * 0.30000000000000004) is passed on unchanged. The walk is iterative (no recursion to blow); the text is read
 * again only when the body holds a number (any may be a rounded literal: 1.0000000000000000001 parses to 1).
 */
export function unrepresentableNumber(value: unknown, text: string, from = 0, to = text.length): 'infinite' | 'rounded' | undefined {
  let numbers = false;
  // Only containers are stacked: a flat array of 100k numbers is read in place, not pushed item by item.
  const stack: object[] = [[value]];
  while (stack.length) {
    const container = stack.pop()!;
    for (const item of Array.isArray(container) ? (container as unknown[]) : Object.values(container)) {
      if (typeof item === 'number') {
        if (!Number.isFinite(item)) return 'infinite';
        numbers = true;
      } else if (item !== null && typeof item === 'object') stack.push(item);
    }
  }
  return numbers && hasRoundedLiteral(text, from, to) ? 'rounded' : undefined;
}

/** The [start, end) of each number literal of a valid JSON text that a double does not hold; the first only when `first`. */
function inexactLiterals(text: string, from: number, to: number, first: boolean): [number, number][] {
  const spans: [number, number][] = [];
  let inString = false;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 45 || (c >= 48 && c <= 57)) {
      // '-' or a digit outside a string starts a number literal: read to its end, noting its significant digits.
      let end = i;
      let firstDigit = -1; // first and last non-zero digit before the exponent
      let last = -1;
      let dot = -1;
      let exponent = false;
      for (let d = c; ; d = text.charCodeAt(++end)) {
        const digit = d >= 48 && d <= 57;
        if (digit && d !== 48 && !exponent) {
          if (firstDigit < 0) firstDigit = end;
          last = end;
        } else if (d === 46) dot = end;
        else if (d === 101 || d === 69) exponent = true;
        else if (!digit && d !== 43 && d !== 45) break; // the end of the literal
      }
      const significant = firstDigit < 0 ? 0 : last - firstDigit + 1 - (dot > firstDigit && dot < last ? 1 : 0);
      // (A non-zero literal needs an exponent or 300-odd zeros to fall below a double's range.)
      if (firstDigit >= 0 && (significant > 15 || exponent || end - i > 300) && !exact(text.slice(i, end))) {
        spans.push([i, end]);
        if (first) return spans;
      }
      i = end - 1;
    }
  }
  return spans;
}

/** Whether a non-zero number literal is the number its double writes back. */
function exact(literal: string): boolean {
  const parsed = Number(literal);
  if (parsed === 0) return false; // a non-zero literal below a double's range
  const back = String(parsed);
  return back === literal || decimalValue(literal) === decimalValue(back);
}

/** A JSON number's exact value, spelled one way: sign, significant digits, power of ten ("-1.50e3" → "-15e2"). Not zero. */
function decimalValue(num: string): string {
  const negative = num.charCodeAt(0) === 45;
  const from = negative ? 1 : 0;
  let e = num.indexOf('e');
  if (e < 0) e = num.indexOf('E');
  if (e < 0) e = num.length;
  const dot = num.indexOf('.');
  const fraction = dot >= 0 && dot < e;
  const digits = fraction ? num.slice(from, dot) + num.slice(dot + 1, e) : num.slice(from, e);
  let start = 0;
  while (digits.charCodeAt(start) === 48) start++;
  let end = digits.length;
  while (end > start && digits.charCodeAt(end - 1) === 48) end--;
  const exponent = (e < num.length ? Number(num.slice(e + 1)) : 0) - (fraction ? e - dot - 1 : 0) + (digits.length - end);
  return `${negative ? '-' : ''}${digits.slice(start, end)}e${exponent}`;
}
