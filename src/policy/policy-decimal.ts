/** A finite number as exact decimal digits, so "100.0000000000000001" > 100 holds (floats would say equal). */
export interface Decimal {
  negative: boolean;
  /** integer digits without leading zeros ("" for zero) */
  int: string;
  /** fraction digits without trailing zeros */
  frac: string;
}

/** Plain decimal text only: no exponent, hex, sign "+", blanks or empty string. */
const DECIMAL_TEXT = /^-?\d+(?:\.\d+)?$/;

export function parseDecimal(value: unknown): Decimal | null {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return null;
    text = expandExponent(String(value));
  } else if (typeof value === 'string') {
    if (value.length > 100 || !DECIMAL_TEXT.test(value) || !Number.isFinite(Number(value))) return null;
    text = value;
  } else {
    return null;
  }
  const negative = text.startsWith('-');
  const [whole = '', fraction = ''] = (negative ? text.slice(1) : text).split('.');
  const int = whole.replace(/^0+/, '');
  const frac = fraction.replace(/0+$/, '');
  return { negative: negative && (int !== '' || frac !== ''), int, frac };
}

export function compareDecimals(a: Decimal, b: Decimal): -1 | 0 | 1 {
  if (a.negative !== b.negative) return a.negative ? -1 : 1;
  const sign = a.negative ? -1 : 1;
  if (a.int.length !== b.int.length) return (a.int.length > b.int.length ? sign : -sign) as -1 | 1;
  const width = Math.max(a.frac.length, b.frac.length);
  const left = a.int + a.frac.padEnd(width, '0');
  const right = b.int + b.frac.padEnd(width, '0');
  if (left === right) return 0;
  return (left > right ? sign : -sign) as -1 | 1;
}

/**
 * A finite number as plain decimal text, the value a rule compared ("1000000000000000000000", "0.0000001"): where a
 * number is sent as text (a Nango query value), String() would send "1e+21" or "1e-7", which an integer parser reads
 * as 1 or refuses.
 */
export function plainDecimalText(value: number): string {
  return expandExponent(String(value));
}

/** String(1e21) is "1e+21" and String(1.5e-7) is "1.5e-7": write them out digit by digit. */
function expandExponent(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (m === null) return text;
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = m;
  const digits = whole + fraction;
  const point = whole.length + Number(exponent);
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return sign + digits + '0'.repeat(point - digits.length);
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
