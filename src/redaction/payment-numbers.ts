import { REDACTED } from './markers.js';
import { FoldedText, foldForms } from './unicode-forms.js';

/**
 * Digit groups joined by a dash, a dot, or one or two blanks of any kind (spaces, no-break spaces U+00A0 and
 * U+202F, a tab, a line break: a card typed one group per line), not glued to a preceding letter (UPS
 * 1Z999AA10123456784) — but after the escape of a line break or tab (\n, \r, \t: JSON held as text, a webhook body),
 * whose letter is no part of the number, as the token shapes allow (AFTER_ESCAPE).
 */
const DIGIT_RUN = /(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))\d+(?:(?:[.-]|\s{1,2})\d+)*/g;
/**
 * An IBAN: country, two check digits, then 11 to 30 letters and digits, contiguous or in the printed groups of four.
 * Only one of its country's length whose check digits hold (ISO 13616 mod 97) goes (isIban).
 */
export const IBAN = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])/g;

/**
 * The longest valid IBAN the match starts with, ending where a group ends: the pattern may have taken a group of
 * the text after it ("BE68 5390 0754 7034 2026 refund"). At most ten checks of 34 characters.
 */
export function redactIban(match: string): string {
  for (let end = match.length; end >= 15; end = match.lastIndexOf(' ', end - 1)) {
    if (isIban(match.slice(0, end).replaceAll(' ', ''))) return REDACTED + match.slice(end);
  }
  return match;
}

/**
 * The length of an IBAN in each country that issues them: the SWIFT IBAN registry (French overseas territories as
 * France, Åland as Finland, the Crown Dependencies as Britain), and the countries whose banks issue them outside it
 * (mostly west and central Africa, Iran). Nicaragua's moved from 32 to 28 and Burundi's from 16 to 27; both are kept.
 * A run of capitals and digits whose country issues none, or that is not its country's length, is no IBAN: a ULID or
 * a product code of an IBAN's shape passes mod 97 one time in 97, and a ULID (26 characters) is now judged only when
 * it starts DZ, IR, IS or TR.
 */
const IBAN_LENGTHS: ReadonlyMap<string, readonly number[]> = (() => {
  const table =
    'AD24 AE23 AL28 AO25 AT20 AX18 AZ28 BA20 BE16 BF28 BG22 BH22 BI16,27 BJ28 BL27 BR29 BY28 CF27 CG27 CH21 CI28 CM27 ' +
    'CR22 CV25 CY28 CZ24 DE22 DJ27 DK18 DO28 DZ26 EE20 EG29 ES24 FI18 FK18 FO18 FR27 GA27 GB22 GE22 GF27 GG22 GI23 ' +
    'GL18 GP27 GQ27 GR27 GT28 GW25 HN28 HR21 HU28 IE22 IL23 IM22 IQ23 IR26 IS26 IT27 JE22 JO30 KM27 KW30 KZ20 LB28 ' +
    'LC32 LI21 LT20 LU20 LV21 LY25 MA28 MC27 MD24 ME22 MF27 MG27 MK19 ML28 MN20 MQ27 MR27 MT31 MU30 MZ25 NC27 NE28 ' +
    'NI28,32 NL18 NO15 OM23 PF27 PK24 PL28 PM27 PS29 PT25 QA29 RE27 RO24 RS22 RU33 SA24 SC31 SD18 SE24 SI19 SK24 ' +
    'SM27 SN28 SO23 ST25 SV28 TD27 TF27 TG28 TL23 TN24 TR26 UA29 VA22 VG24 WF27 XK20 YE30 YT27';
  return new Map(table.split(' ').map((entry) => [entry.slice(0, 2), entry.slice(2).split(',').map(Number)] as const));
})();

export function isIban(compact: string): boolean {
  if (compact.length < 15 || compact.length > 34) return false;
  if (!IBAN_LENGTHS.get(compact.slice(0, 2))?.includes(compact.length)) return false;
  const check = Number(compact.slice(2, 4));
  if (check < 2 || check > 98) return false;
  // The country and check digits move to the end, letters become 10-35; the number mod 97 is 1.
  const rearranged = compact.slice(4) + compact.slice(0, 4);
  let rest = 0;
  for (const ch of rearranged) {
    const value = parseInt(ch, 36);
    rest = value > 9 ? (rest * 100 + value) % 97 : (rest * 10 + value) % 97;
  }
  return rest === 1;
}

interface DigitGroup {
  start: number;
  end: number;
  digits: string;
  /** separator before this group ('' for the first) */
  sep: string;
}

/**
 * Card numbers: 13-19 digits, contiguous or in the printed groupings (4-4-4-4[-3], Amex 4-6-5,
 * Diners 4-6-4), a card-issuer first digit (2-6) and a valid Luhn check digit. The grouping
 * rule is what keeps dash-joined ids such as Amazon's 3-7-7 order numbers out.
 */
export function redactCardNumbers(text: string): string {
  // Text with non-ASCII characters (full-width or Arabic-Indic digits, en dashes, no-break spaces) is read in a folded
  // copy of the same length (unicode-forms.ts); what stays is taken from the text as written.
  const scanned = foldForms(text);
  if (!/\d{4}/.test(scanned)) return text;
  const redactRun = (run: string, offset: number): string => {
    // A run glued to the letters after it ends inside a token (a UUID's …-8000-0000a0000000, a hex digest's
    // 4277058878950ef2…): its last group is no card's, as a run glued to letters before it is none (DIGIT_RUN).
    if (/[A-Za-z]/.test(scanned[offset + run.length] ?? '')) {
      const last = LAST_GROUP.exec(run)?.index ?? 0;
      return last === 0 ? text.slice(offset, offset + run.length) : judgeRun(run.slice(0, last), offset) + text.slice(offset + last, offset + run.length);
    }
    return judgeRun(run, offset);
  };
  const judgeRun = (run: string, offset: number): string => {
    const written = scanned === text ? run : text.slice(offset, offset + run.length);
    // The id of a global object id (gid://shopify/Order/5927413514539) is an id whatever its digits; only the id:
    // digits after it ("…/Order/123 4111 1111 1111 1111") are judged as any others.
    if (offset > 8 && text[offset - 1] === '/' && GID_BEFORE.test(text.slice(Math.max(0, offset - 160), offset))) {
      const id = /^\d+/.exec(run)![0].length;
      return written.slice(0, id) + redactCardGroups(run.slice(id), written.slice(id));
    }
    return redactCardGroups(run, written);
  };
  return scanned === text ? text.replace(DIGIT_RUN, redactRun) : new FoldedText(text, scanned).replace(DIGIT_RUN, redactRun).text;
}

/** The card numbers among a run of ASCII digit groups (see redactCardNumbers), kept as `written` shows them. */
function redactCardGroups(run: string, written: string): string {
  const groups = splitGroups(run);
  let out = '';
  let cursor = 0;
  for (let i = 0; i < groups.length; ) {
    const end = longestCardFrom(groups, i);
    if (end < 0) {
      i++;
      continue;
    }
    out += written.slice(cursor, groups[i]!.start) + REDACTED;
    cursor = groups[end]!.end;
    i = end + 1;
  }
  return out + written.slice(cursor);
}

/** The last group of a digit run, with the separator before it. */
const LAST_GROUP = /(?:[.-]|\s{1,2})\d+$/;

/** What ends just before the id of a global object id: gid://<app>/<Type>/. */
const GID_BEFORE = /gid:\/\/[\w-]{1,64}\/[\w-]{1,64}\/$/;

/**
 * A card issuer's number: Luhn-valid, and a length the issuer of its first digits uses. 16 to 19 digits for the
 * 2-6 issuers (Mastercard, Visa, Discover, JCB, UnionPay, Maestro); 15 only Amex (34, 37) and JCB's old 2131;
 * 14 only Diners (30, 36, 38, 39); 13 only Visa's old numbers (4). Shopify's 13-digit order ids start with 5
 * or 6, and one in ten passes Luhn: those are ids, not cards.
 */
export function isCardNumber(digits: string): boolean {
  const n = digits.length;
  if (n < 13 || n > 19 || !/^[2-6]\d+$/.test(digits)) return false;
  if (n === 13 && digits[0] !== '4') return false;
  if (n === 14 && !/^3[0689]/.test(digits)) return false;
  if (n === 15 && !/^(?:3[47]|2131)/.test(digits)) return false;
  return luhnValid(digits);
}

export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

function splitGroups(run: string): DigitGroup[] {
  const groups: DigitGroup[] = [];
  const re = /(^|[.-]|\s{1,2})(\d+)/g;
  for (let m = re.exec(run); m !== null; m = re.exec(run)) {
    const sep = m[1] ?? '';
    const digits = m[2] ?? '';
    groups.push({ start: m.index + sep.length, end: m.index + m[0].length, digits, sep });
  }
  return groups;
}

/** Index of the last group of the longest card starting at group i, or -1. */
function longestCardFrom(groups: readonly DigitGroup[], i: number): number {
  let best = -1;
  let digits = '';
  for (let j = i; j < groups.length; j++) {
    digits += groups[j]!.digits;
    if (digits.length > 19) break;
    if (j > i && groups[j]!.sep !== groups[i + 1]!.sep) break;
    if (isCardNumber(digits) && validLayout(groups.slice(i, j + 1).map((g) => g.digits.length))) best = j;
  }
  return best;
}

function validLayout(lengths: readonly number[]): boolean {
  if (lengths.length === 1) return true;
  const layout = lengths.join('-');
  if (layout === '4-6-5' || layout === '4-6-4') return true;
  const last = lengths[lengths.length - 1]!;
  return lengths.slice(0, -1).every((n) => n === 4) && last >= 1 && last <= 4;
}
