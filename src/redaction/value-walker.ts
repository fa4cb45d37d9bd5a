import { isAddressContainer, isFlatAddressPart, isPostalKey, looksLikeAddress } from './address-keys.js';
import { secretItems } from './array-shapes.js';
import { redactContactsInText } from './contacts-in-text.js';
import { redactedHead } from './cut-safe-head.js';
import { define, numberCost, RecordedNames, stripNul, toWellFormed } from './jsonb-copy.js';
import { CIRCULAR, REDACTED, TRUNCATED } from './markers.js';
import { redactCardNumbers } from './payment-numbers.js';
import { redactSecretsInText } from './patterns.js';
import { isPaymentContainer, isPaymentSafeLeaf } from './payment-keys.js';
import {
  isDocumentKey,
  isIdentityDataName,
  isIdentityKind,
  isIdentityNumberList,
  isKycContainer,
  isKycSafeLeaf,
  isPersonalDataName,
  isPersonContainer,
  isPersonNameKey,
  looksLikeIdentityDocument,
} from './personal-keys.js';
import { isIdentifierKey, isPairNameKey, isPairTypeKey, isPairValueKey, normalizeKey, readAsAscii, spellsAsciiOtherwise } from './redaction-keys.js';
import { isSecretFieldName, isSecretName, isTimeAboutSecret } from './secret-keys.js';
import { foldForms } from './unicode-forms.js';
import { carriesData, describesPerson, isPersonalDataOrAddressName, isSecretEntry, looksLikeCard } from './value-signals.js';

export const REDACTION_LIMITS = {
  maxDepth: 32,
  maxStringLength: 10_000,
  maxArrayItems: 1_000,
  /** Rough JSON size of the whole output, in UTF-16 code units. */
  maxOutputChars: 256 * 1024,
  /**
   * Characters of text the patterns may read, all passes counted: texts that redact to "[REDACTED]" cost little
   * output but were each read up to four times (a long one's head, with and without its format characters), so 5 MB
   * of them held the event loop for seconds within the output budget.
   */
  maxScannedChars: 1024 * 1024,
  /** A property name judged longer than this is taken for a secret's (no name the rules know is near it). */
  maxKeyLength: 256,
} as const;

export type RedactionLimits = { readonly [K in keyof typeof REDACTION_LIMITS]: number };

/** A value that is one run of digits and nothing else: what an identifier key may hold without being taken for a card. */
const BARE_DIGITS = /^\s*\d+\s*$/;

/**
 * A URL path in a call's input (nango_proxy's `path`, with or without its leading "/"): a segment of bare digits names a resource, as a value
 * under an identifier key does, so a numeric id that happens to pass Luhn stays (an approver must see which user a
 * write targets: two writes to two users were shown alike). A card in any other segment, and every other secret
 * shape in the whole path, is still hidden. Segments are split on "/", which no card's digit groups are joined by.
 */
function redactUrlPath(text: string): string {
  return redactSecretsInText(text, { cards: false })
    .split('/')
    .map((segment) => {
      const folded = foldForms(segment);
      if (BARE_DIGITS.test(folded)) return segment;
      // Shopify's REST resources end in their format (/products/4231260082919.json): the id is kept as a bare one is,
      // what follows it (a query) judged as any other text. A card number never ends in ".json".
      const resource = RESOURCE_ID.exec(folded)?.[0].length ?? 0;
      return segment.slice(0, resource) + redactCardNumbers(segment.slice(resource));
    })
    .join('/');
}
/** A path segment's numeric id followed by its format: 4231260082919.json, 123.xml. */
const RESOURCE_ID = /^\d+\.(?:json|xml)(?![A-Za-z0-9])/;
/** A value that is nothing but digits and separators: a code (a tracking number, a tag, a reference), not a sentence. */
const BARE_CODE = /^[\s\d./-]*$/;

type Mode = 'input' | 'output';

interface Ctx {
  key: string;
  norm: string;
  depth: number;
  /** the plain name (name, displayName) of an object that describes a person */
  personName: boolean;
  /** somewhere under card or bank details */
  payment: boolean;
  /** somewhere under identity-document extraction */
  kyc: boolean;
}

/** Text with NUL or any character outside ASCII: only such text may read otherwise than it is written (readAs); a first look. */
// eslint-disable-next-line no-control-regex
const NUL_OR_NON_ASCII = /[\u0000\u0080-\uffff]/;
/** The invisible format characters (\p{Cf}: U+00AD, U+200B-U+200F, U+2060, U+FEFF, …) that can split a secret, as NUL can. */
const FORMAT_CHAR = /\p{Cf}/u;
const FORMAT_CHARS = /\p{Cf}/gu;
/** As recorded: NUL shown as U+FFFD (which the text may hold of its own, too), and the format characters. */
const SHOWN_NUL_OR_FORMAT_CHARS = /[\uFFFD\p{Cf}]/gu;

/**
 * One pass over the value building a fresh copy: the caller's value is only read (the
 * model gets it unredacted), and the copy is plain JSON that PostgreSQL jsonb accepts.
 */
export class Walker {
  private readonly ancestors = new Set<object>();
  private used = 0;
  private scanned = 0;

  constructor(
    private readonly mode: Mode,
    private readonly limits: RedactionLimits = REDACTION_LIMITS,
  ) {}

  root(value: unknown): unknown {
    const out = this.value(value, { key: '', norm: '', depth: 0, personName: false, payment: false, kyc: false });
    return out === undefined ? null : out;
  }

  private get exhausted(): boolean {
    return this.used > this.limits.maxOutputChars || this.scanned > this.limits.maxScannedChars;
  }

  /** undefined means "leave the member out", as JSON.stringify would. */
  private value(value: unknown, ctx: Ctx): unknown {
    if (ctx.depth > this.limits.maxDepth || this.exhausted) return this.charge(TRUNCATED);
    const byKey = this.byKey(value, ctx);
    if (byKey !== undefined) return this.charge(byKey);
    switch (typeof value) {
      case 'string':
        return this.charge(this.text(value, ctx.key));
      case 'number':
        if (!Number.isFinite(value)) return this.charge(null);
        return this.charge(looksLikeCard(value, ctx.key) ? REDACTED : value);
      case 'bigint':
        return this.charge(this.text(String(value), ctx.key));
      case 'boolean':
        return this.charge(value);
      case 'object':
        return value === null ? this.charge(null) : this.object(value, ctx);
      default:
        return undefined; // functions, symbols, undefined
    }
  }

  /** Redaction decided by the property name alone; null and booleans carry no secret and stay. */
  private byKey(value: unknown, ctx: Ctx): unknown {
    if (ctx.norm === '' || !carriesData(value)) return undefined;
    const { norm } = ctx;
    if (isSecretName(ctx.key, norm)) return isTimeAboutSecret(ctx.key, norm, value) ? undefined : REDACTED;
    // Identity data (KYC) goes from params too, as SSN and tax ids do: what a KYC provider is sent, it sends back. A
    // scalar by its name; a record or a list under such a name is walked in KYC mode (record: only the facts
    // KYC_SAFE names stay), so a check's outcome (Onfido breakdown.mrz: {result: "clear"}) is kept and the data goes.
    if (typeof value !== 'object' && isIdentityDataName(ctx.key, norm)) return REDACTED;
    // A plain item of a list of identity numbers (document_numbers: ["999228775"]) keeps the list's key.
    if (typeof value !== 'object' && (ctx.kyc ? !isKycSafeLeaf(norm) : isIdentityNumberList(norm))) return REDACTED;
    if (this.mode === 'input') return undefined;
    if (isPersonalDataName(ctx.key, norm)) return REDACTED;
    if (ctx.personName) return REDACTED;
    if (typeof value === 'object') return undefined;
    if (isAddressContainer(norm) || isFlatAddressPart(norm)) return REDACTED;
    if (ctx.payment && !isPaymentSafeLeaf(norm)) return REDACTED;
    return undefined;
  }

  private object(value: object, ctx: Ctx): unknown {
    if (this.ancestors.has(value)) return this.charge(CIRCULAR);
    this.ancestors.add(value);
    try {
      if (value instanceof Date) return this.charge(Number.isNaN(value.getTime()) ? null : value.toISOString());
      if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return this.charge('[Binary]');
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function' && !Array.isArray(value)) {
        return this.value((toJSON as () => unknown).call(value), { ...ctx, depth: ctx.depth + 1 });
      }
      if (Array.isArray(value)) return this.array(value, ctx);
      const keys = Object.keys(value);
      if (this.mode === 'output' && (isAddressContainer(ctx.norm) || looksLikeAddress(keys))) {
        return this.address(value as Record<string, unknown>, keys);
      }
      return this.record(value as Record<string, unknown>, keys, ctx);
    } catch {
      return this.charge('[Unreadable]');
    } finally {
      this.ancestors.delete(value);
    }
  }

  private array(items: readonly unknown[], ctx: Ctx): unknown[] {
    this.spend(2);
    const out: unknown[] = [];
    const n = Math.min(items.length, this.limits.maxArrayItems);
    // Items keep the array's key: "phones": [...] or "addresses": [...] say what each item is.
    const itemCtx = { ...ctx, depth: ctx.depth + 1 };
    const secretEntry = isSecretEntry(items);
    // Items secret by their neighbours: a header's value in a flat header list, the lines of a private key.
    const hidden = secretItems(items, n);
    for (let i = 0; i < n; i++) {
      if (this.exhausted) {
        out.push(this.charge(`${TRUNCATED} ${items.length - i} more items`));
        return out;
      }
      const item = (secretEntry && i === 1) || hidden?.has(i) ? this.charge(REDACTED) : this.value(items[i], itemCtx);
      out.push(item === undefined ? null : item);
    }
    if (items.length > n) out.push(this.charge(`${TRUNCATED} ${items.length - n} more items`));
    return out;
  }

  private record(value: Record<string, unknown>, keys: readonly string[], ctx: Ctx): Record<string, unknown> {
    this.spend(2);
    const out: Record<string, unknown> = {};
    // Both asked only once a member needs the answer: most records have no name, and no value field.
    let person: boolean | undefined = isPersonContainer(ctx.norm) || undefined;
    let sensitivePair: boolean | undefined;
    const payment = ctx.payment || isPaymentContainer(ctx.norm);
    const kyc =
      ctx.kyc ||
      isKycContainer(ctx.norm) ||
      (ctx.norm !== '' && isIdentityDataName(ctx.key, ctx.norm)) ||
      (isDocumentKey(ctx.norm) && looksLikeIdentityDocument(value, keys));
    const names = new RecordedNames(keys, out);
    for (const rawKey of keys) {
      if (this.exhausted) {
        define(out, names.unique(TRUNCATED), true);
        break;
      }
      // Matched without its NULs ("pass\u0000word" is still a password), recorded with them replaced.
      const key = stripNul(rawKey);
      const raw = value[rawKey];
      // Not normalised nor judged: every rule reads the whole name, several times.
      if (key.length > this.limits.maxKeyLength) {
        define(out, names.of(rawKey, this.key(rawKey, key)), this.charge(REDACTED));
        continue;
      }
      const norm = normalizeKey(key);
      const pairValue = isPairValueKey(norm) && carriesData(raw) && (sensitivePair ??= this.isSensitivePair(value, keys));
      const personName = this.mode === 'output' && isPersonNameKey(norm) && (person ??= describesPerson(value, keys));
      const child = pairValue ? this.charge(REDACTED) : this.value(raw, { key, norm, depth: ctx.depth + 1, personName, payment, kyc });
      if (child !== undefined) define(out, names.of(rawKey, this.key(rawKey, key)), child);
    }
    return out;
  }

  /** An address keeps its postal code only: enough for ops to reason about shipping, not enough to find a person. */
  private address(value: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
    this.spend(2);
    const out: Record<string, unknown> = {};
    const names = new RecordedNames(keys, out);
    for (const rawKey of keys) {
      const key = stripNul(rawKey);
      if (key.length > this.limits.maxKeyLength || !isPostalKey(normalizeKey(key))) continue;
      const postal = value[rawKey];
      const kept = typeof postal === 'string' ? this.text(postal, key) : typeof postal === 'number' || postal === null ? postal : REDACTED;
      define(out, names.of(rawKey, this.key(rawKey, key)), this.charge(kept));
    }
    return out;
  }

  /**
   * {name: "Authorization", value: "Basic …"} (HAR, fetch, Postman, AWS tags), {name: "Phone", value: …} (Shopify
   * note_attributes), {key: "customer_phone", value: …} (metafields): the name field says what the value is, as a
   * property name would, so the value fields are redacted. Output judges the name as it judges a property name.
   * Identity data hides the value in params too ({name: "date_of_birth", value}). A kind ({type: "ssn", value}: Onfido
   * id_numbers[]) is judged only that way, in params and output alike: the same members hold a discount's
   * {type: "percentage", value}.
   */
  private isSensitivePair(value: Record<string, unknown>, keys: readonly string[]): boolean {
    for (const key of keys) {
      const named = isPairNameKey(key);
      if (!named && !isPairTypeKey(key)) continue;
      const raw = value[key];
      if (typeof raw !== 'string') continue;
      const name = stripNul(raw);
      // A kind ({type: "ssn", value}) hides its value only when it names a secret (SSN and tax ids too) or identity data.
      if (!named) {
        if (name.length <= 128 && (isSecretFieldName(name) || isIdentityKind(name))) return true;
        continue;
      }
      // A "name" too long to be a field's (as a property name would be): its value is taken for a secret's.
      if (name.length > this.limits.maxKeyLength || isSecretFieldName(name)) return true;
      if (name.length <= 128 && (isIdentityKind(name) || (this.mode === 'output' && isPersonalDataOrAddressName(name)))) return true;
    }
    return false;
  }

  /** A property name as recorded: redacted like any text; `key` is its NUL-less form that redaction matched on. */
  private key(rawKey: string, key: string): string {
    this.spend(rawKey.length + 3);
    return this.text(rawKey, key.length > this.limits.maxKeyLength ? key.slice(0, this.limits.maxKeyLength) : key);
  }

  private text(raw: string, key: string): string {
    if (raw.length <= this.limits.maxStringLength) return toWellFormed(this.redactText(raw, key));
    return toWellFormed(`${this.redactedHead(raw, key)}…${TRUNCATED}`);
  }

  /** The first maxStringLength characters of a longer text, redacted without showing part of a secret the cut split. */
  private redactedHead(raw: string, key: string): string {
    return redactedHead(raw, this.limits.maxStringLength, (text) => this.redactText(text, key));
  }

  private redactText(text: string, key: string): string {
    const readsOtherwise = NUL_OR_NON_ASCII.test(text) && (text.includes('\u0000') || FORMAT_CHAR.test(text) || spellsAsciiOtherwise(text));
    return readsOtherwise ? this.redactAroundHidden(text, key) : this.redact(text, key);
  }

  private redact(text: string, key: string): string {
    this.scanned += text.length;
    // An identifier key exempts a bare digit id that happens to pass Luhn, not a card written in its text
    // ("card 4111-1111-1111-1111" under customerId) nor a key that merely ends in "_id"; and a code in a national
    // phone's shape (sku "0201-123456"), not a phone with a country code.
    const identifier = isIdentifierKey(key);
    // Judged as read (any script's digits, Unicode dashes and blanks: unicode-forms.ts), as the card scan reads them.
    const read = foldForms(text);
    const out = key === 'path' && this.mode === 'input' ? redactUrlPath(text) : redactSecretsInText(text, { cards: !(identifier && BARE_DIGITS.test(read)) });
    // National numbers (no country code) are looked for in text only: a value that is nothing but such a number is as
    // often a tracking number (Shopify's trackingInfo.number), a tag or a reference; phones under a phone's name, or
    // named by a pair, go by that name.
    return this.mode === 'output' ? redactContactsInText(out, { nationalPhones: !identifier && !BARE_CODE.test(read) }) : out;
  }

  /**
   * Text that reads otherwise than it is written (readAs): with NUL (jsonb refuses it), recorded with each NUL replaced
   * by U+FFFD, not dropped ("5\u0000000" is not what the vendor gets as "5000", and must not be shown as that); with
   * format characters (zero-width space, soft hyphen, BOM, …), recorded as written; spelling ASCII otherwise
   * (full-width ｐａｓｓｗｏｒｄ=…, mathematical bold 𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝, a Cyrillic а in pаssword: spellsAsciiOtherwise), recorded
   * as written too. None of them may hide a secret ("sk_live_…" split by a zero-width space, a card with U+200B between
   * its groups, a secret name the patterns read as ASCII only), so the text is also redacted as it reads: when that
   * finds more than the recorded text shows redacted, read the same way, the whole text is [REDACTED].
   */
  private redactAroundHidden(text: string, key: string): string {
    const replaced = this.redact(text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text, key);
    const read = readAs(text);
    const readRedacted = this.redact(read, key);
    if (readRedacted === read) return replaced;
    return readAs(replaced.replace(SHOWN_NUL_OR_FORMAT_CHARS, '')) === readRedacted.replaceAll('\uFFFD', '') ? replaced : REDACTED;
  }

  /**
   * Counts a value towards the output budget, roughly as many characters as its JSON takes — as PostgreSQL
   * prints it: a jsonb number comes back digit by digit (1e308 is 309 characters).
   */
  private charge<T>(value: T): T {
    this.spend(typeof value === 'string' ? value.length + 2 : typeof value === 'number' ? numberCost(value) : 5);
    return value;
  }

  private spend(chars: number): void {
    this.used += chars;
  }
}

/**
 * Text as a reader takes it: without NUL and the format characters that draw nothing, and what spells ASCII otherwise
 * read as that ASCII (readAsAscii).
 */
function readAs(text: string): string {
  return readAsAscii(stripNul(text).replace(FORMAT_CHARS, ''));
}
