import { hasStreetLine, isAddressContainer } from './address-keys.js';
import { stripNul } from './jsonb-copy.js';
import { redactCardNumbers } from './payment-numbers.js';
import { isPersonalDataName, isPersonSignalKey, isPersonType } from './personal-keys.js';
import { isIdentifierKey, normalizeKey } from './redaction-keys.js';
import { isSecretFieldName } from './secret-keys.js';

/** null and booleans carry no secret: they stay even where a secret would be redacted. */
export function carriesData(value: unknown): boolean {
  return value !== null && value !== undefined && typeof value !== 'boolean';
}

/**
 * A record that describes a person without being under a person's key: it says so (Stripe `object: "customer"`,
 * Salesforce `attributes.type: "Contact"`, GitHub `type: "User"`), or has what only a person has beside its name
 * (GitHub's login, a first name, a street line).
 */
export function describesPerson(value: Record<string, unknown>, keys: readonly string[]): boolean {
  for (const key of ['object', 'type', '__typename'] as const) {
    const said = Object.hasOwn(value, key) ? isPersonType(value[key]) : undefined;
    if (said !== undefined) return said;
  }
  const attributes = Object.hasOwn(value, 'attributes') ? value['attributes'] : undefined;
  const said = typeof attributes === 'object' && attributes !== null ? isPersonType((attributes as Record<string, unknown>)['type']) : undefined;
  return said ?? (keys.some(isPersonSignalKey) || hasStreetLine(keys));
}

export function isPersonalDataOrAddressName(name: string): boolean {
  const norm = normalizeKey(name);
  return isPersonalDataName(name, norm) || isAddressContainer(norm);
}

/** ["X-Shopify-Access-Token", "shpat_…"], an entry of a header or parameter list: the first item names the second. */
export function isSecretEntry(items: readonly unknown[]): boolean {
  return items.length === 2 && typeof items[0] === 'string' && isSecretFieldName(stripNul(items[0])) && carriesData(items[1]);
}

/** A card number sent as a JSON number rather than a string. */
export function looksLikeCard(value: number, key: string): boolean {
  if (!Number.isSafeInteger(value) || isIdentifierKey(key)) return false;
  const digits = String(value);
  return redactCardNumbers(digits) !== digits;
}
