/**
 * Numbers written with non-ASCII forms: decimal digits of any script (Arabic-Indic ٤١١١, full-width ４１１１), dashes
 * (en and em dash, minus sign U+2212, full-width hyphen-minus U+FF0D) and blanks (no-break space, thin space, …). The
 * patterns for cards, tax ids, phones and IBANs are written for ASCII; text that holds other forms is scanned in a
 * folded copy of the same length, and what they find is cut out of the text as written.
 */

/** Any character outside ASCII: one test, and pure-ASCII text (nearly all of it) goes the fast path. */
const NON_ASCII = /[\u0080-\uffff]/;

/**
 * The horizontal blanks of Unicode (general category Zs) and the tab, as a character-class body: what may stand around
 * a ":" or "=" or after an auth scheme. Never a line break, nor U+2028/U+2029 (Zl, Zp).
 */
export const BLANK_CHARS = String.raw` \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000`;

/**
 * What the folded copy reads as ASCII: \p{Nd} (digits), \p{Pd} (dashes), U+2212 (minus sign), \p{Zs} (blanks), and the
 * full-width plus and parentheses a phone typed with an East Asian input method has. Astral characters (the
 * mathematical digits U+1D7CE…, the Yezidi hyphen U+10EAD) are two UTF-16 units and have no one-unit ASCII twin: they
 * are left as written (their surrogates are never folded), so offsets in the copy stay offsets in the text.
 */
const DIGIT = /\p{Nd}/u;
const DASH = /[\p{Pd}\u2212]/u;
const BLANK = /\p{Zs}/u;
const OTHER: Readonly<Record<string, string>> = { '\uff0b': '+', '\uff08': '(', '\uff09': ')' };

/**
 * What each UTF-16 unit folds to, found once per unit seen: 0 not yet asked, KEEP stays, otherwise the ASCII code it
 * reads as. 64 KiB, and a lookup per non-ASCII unit: a regex with \p{…} classes costs several times more.
 */
const KEEP = 1;
const foldedCode = new Uint8Array(0x10000);

function foldCode(code: number): number {
  let folded = foldedCode[code]!;
  if (folded === 0) {
    folded = KEEP;
    const ch = String.fromCharCode(code);
    if (code >= 0xd800 && code <= 0xdfff) folded = KEEP;
    else if (DIGIT.test(ch)) folded = 0x30 + digitValue(code);
    else if (DASH.test(ch)) folded = 0x2d;
    else if (BLANK.test(ch)) folded = 0x20;
    else if (OTHER[ch] !== undefined) folded = OTHER[ch].charCodeAt(0);
    foldedCode[code] = folded;
  }
  return folded;
}

/**
 * Unicode puts the ten digits of each script on ten consecutive code points, 0 first: a digit's value is its distance
 * from the start of its run of \p{Nd} code points, modulo 10 (two scripts' runs may touch).
 */
function digitValue(code: number): number {
  let start = code;
  while (start > 0 && DIGIT.test(String.fromCharCode(start - 1))) start--;
  return (code - start) % 10;
}

/** The last text folded and its copy: cards, tax ids and contacts each ask for the same text's copy in turn. */
let lastText = '';
let lastFolded = '';

/**
 * The text with each foldable character read as its ASCII twin; the same length, each character where it was. Text
 * of ASCII alone is the text itself (one regex test): a caller compares the two to take its plain-string path.
 */
export function foldForms(text: string): string {
  if (!NON_ASCII.test(text)) return text;
  if (text === lastText) return lastFolded;
  lastFolded = foldUnits(text);
  lastText = text;
  return lastFolded;
}

function foldUnits(text: string): string {
  let out = '';
  let cursor = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    const folded = foldCode(code);
    if (folded === KEEP) continue;
    out += text.slice(cursor, i) + String.fromCharCode(folded);
    cursor = i + 1;
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

/**
 * A String.replace replacer: (match, ...groups, offset, whole). Typed loosely to take each caller's own signature.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Replacer = (match: string, ...rest: any[]) => string;

/**
 * `pattern` replaced in `text`, its matches found in `scanned` (text's folded copy, the same length) and the replacer
 * asked about them as found there. Everything outside a match is taken from the text as written; so is what a
 * replacement keeps at either end of its match (redactIban keeps the groups after the IBAN). A replacement equal to
 * its match leaves the text as written. A string replacement is taken literally (no "$1"); `pattern` must be global.
 */
function replaceBoth(text: string, scanned: string, pattern: RegExp, replacer: Replacer | string): FoldedText {
  let out = '';
  let outScanned = '';
  let cursor = 0;
  // exec over the (global) pattern itself, as String.replace does: matchAll would copy the pattern on every call.
  pattern.lastIndex = 0;
  for (let m = pattern.exec(scanned); m !== null; m = pattern.exec(scanned)) {
    const match = m[0];
    const start = m.index;
    if (match === '') {
      pattern.lastIndex++;
      continue;
    }
    const next = pattern.lastIndex;
    const replacement = typeof replacer === 'string' ? replacer : replacer(match, ...m.slice(1), start, scanned);
    pattern.lastIndex = next;
    if (replacement === match) continue;
    const end = start + match.length;
    const max = Math.min(match.length, replacement.length);
    let head = 0;
    while (head < max && replacement.charCodeAt(head) === match.charCodeAt(head)) head++;
    let tail = 0;
    while (tail < max - head && replacement.charCodeAt(replacement.length - 1 - tail) === match.charCodeAt(match.length - 1 - tail)) tail++;
    const middle = replacement.slice(head, replacement.length - tail);
    out += text.slice(cursor, start + head) + middle + text.slice(end - tail, end);
    outScanned += scanned.slice(cursor, start + head) + foldForms(middle) + scanned.slice(end - tail, end);
    cursor = end;
  }
  pattern.lastIndex = 0;
  return cursor === 0 ? new FoldedText(text, scanned) : new FoldedText(out + text.slice(cursor), outScanned + scanned.slice(cursor));
}

/**
 * A text and its folded copy, redacted step by step as a string would be (the same includes, search and replace): the
 * copy is searched, the text as written is what comes out.
 */
export class FoldedText {
  constructor(
    readonly text: string,
    readonly scanned: string = foldForms(text),
  ) {}

  includes(search: string): boolean {
    return this.scanned.includes(search);
  }

  search(pattern: RegExp): number {
    return this.scanned.search(pattern);
  }

  replace(pattern: RegExp, replacer: Replacer | string): FoldedText {
    const next = replaceBoth(this.text, this.scanned, pattern, replacer);
    return next.text === this.text ? this : next;
  }
}

/** What the redaction steps ask of their text: a string, or a FoldedText. */
export interface Scannable<T> {
  includes(search: string): boolean;
  search(pattern: RegExp): number;
  replace(pattern: RegExp, replacement: string): T;
  replace(pattern: RegExp, replacer: Replacer): T;
}
