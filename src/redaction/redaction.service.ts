import { Injectable } from '@nestjs/common';
import { REDACTED, redactContactsInText, redactCardNumbers, redactSecretsInText } from './patterns.js';
import {
  isAddressContainer,
  isEmailKey,
  isIdentifierKey,
  isKycContainer,
  isKycSafeLeaf,
  isPairNameKey,
  isPairValueKey,
  isPaymentContainer,
  isPaymentKey,
  isPaymentSafeLeaf,
  isPersonalKey,
  isPersonContainer,
  isPersonNameKey,
  isPhoneKey,
  isPostalKey,
  isSecretFieldName,
  isSecretName,
  looksLikeAddress,
  normalizeKey,
} from './redaction-keys.js';

export { REDACTED };
export const CIRCULAR = '[Circular]';
export const TRUNCATED = '[Truncated]';
export const REDACTION_LIMITS = {
  maxDepth: 32,
  maxStringLength: 10_000,
  maxArrayItems: 1_000,
  /** Rough JSON size of the whole output, in UTF-16 code units. */
  maxOutputChars: 256 * 1024,
} as const;

/** A value that is one run of digits and nothing else: what an identifier key may hold without being taken for a card. */
const BARE_DIGITS = /^\s*\d+\s*$/;

/** Secrets in params, before they are written to the ledger. */
export function redactInput(value: unknown): unknown {
  return new Walker('input').root(value);
}

/** Secrets plus personal data in vendor results, before they are written to the ledger. */
export function redactOutput(value: unknown): unknown {
  return new Walker('output').root(value);
}

/** Injectable face of the pure functions above, for services that take their collaborators by DI. */
@Injectable()
export class RedactionService {
  redactInput(value: unknown): unknown {
    return redactInput(value);
  }

  redactOutput(value: unknown): unknown {
    return redactOutput(value);
  }
}

type Mode = 'input' | 'output';

interface Ctx {
  key: string;
  norm: string;
  depth: number;
  /** direct child of an object that describes a person */
  person: boolean;
  /** somewhere under card or bank details */
  payment: boolean;
  /** somewhere under identity-document extraction */
  kyc: boolean;
}

/** Lookahead kept past the cut so a secret straddling it is still recognised whole. */
const CUT_LOOKAHEAD = 1024;

/**
 * One pass over the value building a fresh copy: the caller's value is only read (the
 * model gets it unredacted), and the copy is plain JSON that PostgreSQL jsonb accepts.
 */
class Walker {
  private readonly ancestors = new Set<object>();
  private used = 0;

  constructor(private readonly mode: Mode) {}

  root(value: unknown): unknown {
    const out = this.value(value, { key: '', norm: '', depth: 0, person: false, payment: false, kyc: false });
    return out === undefined ? null : out;
  }

  private get exhausted(): boolean {
    return this.used > REDACTION_LIMITS.maxOutputChars;
  }

  /** undefined means "leave the member out", as JSON.stringify would. */
  private value(value: unknown, ctx: Ctx): unknown {
    if (ctx.depth > REDACTION_LIMITS.maxDepth || this.exhausted) return this.charge(TRUNCATED);
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
    if (isSecretName(ctx.key, ctx.norm)) return REDACTED;
    if (this.mode === 'input') return undefined;
    const { norm } = ctx;
    if (isEmailKey(norm) || isPhoneKey(norm) || isPaymentKey(norm) || isPersonalKey(norm)) return REDACTED;
    if (ctx.person && isPersonNameKey(norm)) return REDACTED;
    if (typeof value === 'object') return undefined;
    if (isAddressContainer(norm)) return REDACTED;
    if (ctx.payment && !isPaymentSafeLeaf(norm)) return REDACTED;
    if (ctx.kyc && !isKycSafeLeaf(norm)) return REDACTED;
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
    const n = Math.min(items.length, REDACTION_LIMITS.maxArrayItems);
    // Items keep the array's key: "phones": [...] or "addresses": [...] say what each item is.
    const itemCtx = { ...ctx, depth: ctx.depth + 1 };
    const secretEntry = isSecretEntry(items);
    for (let i = 0; i < n; i++) {
      if (this.exhausted) {
        out.push(this.charge(`${TRUNCATED} ${items.length - i} more items`));
        return out;
      }
      const item = secretEntry && i === 1 ? this.charge(REDACTED) : this.value(items[i], itemCtx);
      out.push(item === undefined ? null : item);
    }
    if (items.length > n) out.push(this.charge(`${TRUNCATED} ${items.length - n} more items`));
    return out;
  }

  private record(value: Record<string, unknown>, keys: readonly string[], ctx: Ctx): Record<string, unknown> {
    this.spend(2);
    const out: Record<string, unknown> = {};
    const person = isPersonContainer(ctx.norm);
    const payment = ctx.payment || isPaymentContainer(ctx.norm);
    const kyc = ctx.kyc || isKycContainer(ctx.norm);
    const secretPair = isSecretPair(value, keys);
    for (const rawKey of keys) {
      if (this.exhausted) {
        define(out, TRUNCATED, true);
        break;
      }
      const key = stripNul(rawKey);
      const norm = normalizeKey(key);
      const raw = value[rawKey];
      const child =
        secretPair && isPairValueKey(norm) && carriesData(raw)
          ? this.charge(REDACTED)
          : this.value(raw, { key, norm, depth: ctx.depth + 1, person, payment, kyc });
      if (child !== undefined) define(out, this.key(key), child);
    }
    return out;
  }

  /** An address keeps its postal code only: enough for ops to reason about shipping, not enough to find a person. */
  private address(value: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
    this.spend(2);
    const out: Record<string, unknown> = {};
    for (const rawKey of keys) {
      const key = stripNul(rawKey);
      if (!isPostalKey(normalizeKey(key))) continue;
      const postal = value[rawKey];
      const kept = typeof postal === 'string' ? this.text(postal, key) : typeof postal === 'number' || postal === null ? postal : REDACTED;
      define(out, this.key(key), this.charge(kept));
    }
    return out;
  }

  private key(key: string): string {
    this.spend(key.length + 3);
    return this.text(key, key);
  }

  private text(raw: string, key: string): string {
    let text = stripNul(raw);
    const cut = text.length > REDACTION_LIMITS.maxStringLength;
    if (cut) text = text.slice(0, REDACTION_LIMITS.maxStringLength + CUT_LOOKAHEAD);
    // An identifier key exempts a bare digit id that happens to pass Luhn, not a card written in its text
    // ("card 4111-1111-1111-1111" under customerId) nor a key that merely ends in "_id".
    text = redactSecretsInText(text, { cards: !(isIdentifierKey(key) && BARE_DIGITS.test(text)) });
    if (this.mode === 'output') text = redactContactsInText(text);
    if (cut) text = `${text.slice(0, REDACTION_LIMITS.maxStringLength)}…${TRUNCATED}`;
    return toWellFormed(text);
  }

  /** Counts a value towards the output budget, roughly as many characters as its JSON takes. */
  private charge<T>(value: T): T {
    this.spend(typeof value === 'string' ? value.length + 2 : typeof value === 'number' ? 8 : 5);
    return value;
  }

  private spend(chars: number): void {
    this.used += chars;
  }
}

/** null and booleans carry no secret: they stay even where a secret would be redacted. */
function carriesData(value: unknown): boolean {
  return value !== null && value !== undefined && typeof value !== 'boolean';
}

/**
 * {name: "Authorization", value: "Basic …"} (HAR, fetch, Postman, AWS tags, metafields): the name field
 * says what the value is, as a property name would, so the value fields are redacted.
 */
function isSecretPair(value: Record<string, unknown>, keys: readonly string[]): boolean {
  for (const key of keys) {
    if (!isPairNameKey(key)) continue;
    const name = value[key];
    if (typeof name === 'string' && isSecretFieldName(stripNul(name))) return true;
  }
  return false;
}

/** ["X-Shopify-Access-Token", "shpat_…"], an entry of a header or parameter list: the first item names the second. */
function isSecretEntry(items: readonly unknown[]): boolean {
  return items.length === 2 && typeof items[0] === 'string' && isSecretFieldName(stripNul(items[0])) && carriesData(items[1]);
}

/** A card number sent as a JSON number rather than a string. */
function looksLikeCard(value: number, key: string): boolean {
  if (!Number.isSafeInteger(value) || isIdentifierKey(key)) return false;
  const digits = String(value);
  return redactCardNumbers(digits) !== digits;
}

/** Own data property even for "__proto__": plain assignment would set the prototype instead. */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** PostgreSQL jsonb rejects \u0000 in text. */
function stripNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
}

/** jsonb also rejects unpaired surrogates (and a cut can split a pair): replace them with U+FFFD. */
function toWellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}
