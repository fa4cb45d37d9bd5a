/**
 * Secrets and personal data recognised by their shape inside free text.
 * Every pattern is anchored on a boundary so it starts at most once per token:
 * the text can be 10,000 characters of vendor output and must not cost quadratic time.
 */
export const REDACTED = '[REDACTED]';

const PRIVATE_KEY_BLOCK = /-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----|[\s\S]*$)/g;
const BEARER = /\b(Bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*/gi;
const JWT = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g;
const VENDOR_TOKENS: readonly RegExp[] = [
  /\bshp(?:at|ca|pa|ss|ua)_[A-Za-z0-9]{16,}/g, // Shopify access / custom app / private app / shared secret
  /\bAtz[ar]\|[^\s"'<>,;]+/g, // Login with Amazon access (Atza|) and refresh (Atzr|) tokens
  /\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}/g, // Stripe secret and restricted keys
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g, // GitHub tokens
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g, // Slack tokens
  /\bAKIA[0-9A-Z]{16}\b/g, // AWS access key ids
];
/** US SSN 123-45-6789 and EIN 12-3456789, not when part of a longer dash-joined number (Amazon 112-0000001-1234567). */
const TAX_ID = /(?<!\d)(?<!\d-)(?:\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?!\d)(?!-\d)/g;
/** Digit groups joined by single spaces or dashes, not glued to a preceding letter (UPS 1Z999AA10123456784). */
const DIGIT_RUN = /(?<![A-Za-z0-9])\d+(?:[ -]\d+)*/g;
const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/g;
/**
 * Only unmistakable phone shapes: "+" then a country code, or a parenthesised area code.
 * Bare digit strings are left alone: they are far more often order ids, amounts or dates.
 */
const PHONE =
  /(?<![A-Za-z0-9+])(?:\+[1-9]\d{0,2}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]\d{1,4}){2,5}|\+[1-9]\d{7,14}|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{4})(?!\d)/g;

/** Secrets: what input redaction looks for in every string (and output redaction too). */
export function redactSecretsInText(text: string, options: { cards: boolean }): string {
  let out = text;
  if (out.includes('PRIVATE KEY')) out = out.replace(PRIVATE_KEY_BLOCK, REDACTED);
  out = out.replace(BEARER, `$1 ${REDACTED}`);
  if (out.includes('eyJ')) out = out.replace(JWT, REDACTED);
  for (const pattern of VENDOR_TOKENS) out = out.replace(pattern, REDACTED);
  if (options.cards) out = redactCardNumbers(out);
  return out.replace(TAX_ID, REDACTED);
}

/** Contact details: what output redaction adds for vendor results. */
export function redactContactsInText(text: string): string {
  let out = text.includes('@') ? text.replace(EMAIL, REDACTED) : text;
  out = out.replace(PHONE, (match) => {
    const digits = match.replace(/\D/g, '').length;
    return digits >= 8 && digits <= 15 ? REDACTED : match;
  });
  return out;
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
  if (!/\d{4}/.test(text)) return text;
  return text.replace(DIGIT_RUN, (run) => {
    const groups = splitGroups(run);
    let out = '';
    let cursor = 0;
    for (let i = 0; i < groups.length; ) {
      const end = longestCardFrom(groups, i);
      if (end < 0) {
        i++;
        continue;
      }
      out += run.slice(cursor, groups[i]!.start) + REDACTED;
      cursor = groups[end]!.end;
      i = end + 1;
    }
    return out + run.slice(cursor);
  });
}

export function isCardNumber(digits: string): boolean {
  return digits.length >= 13 && digits.length <= 19 && /^[2-6]\d+$/.test(digits) && luhnValid(digits);
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
  const re = /(^|[ -])(\d+)/g;
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
