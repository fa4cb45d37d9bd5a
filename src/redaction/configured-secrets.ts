import { REDACTED } from './markers.js';

/**
 * Secrets the gateway is configured with that have no shape of their own: BOOTSTRAP_ADMIN_KEY may be any 32-512
 * printable characters (an operator's `openssl rand -hex 32`), not the tgw_ shape a minted key has (token-shapes.ts).
 * Registered once the configuration is loaded (loadConfig), they are redacted by value, as written and
 * percent-encoded, wherever text is redacted (redactSecretsInText: params, results, log lines, request paths), and an
 * identifier holding one is refused as one holding a minted key is (holdsCredentialShape).
 */
const values: string[] = [];
/** Shorter values are no key (the configuration refuses them) and would hide ordinary words. */
const MIN_LENGTH = 16;
/** A process loads its configuration once; tests load many: the oldest is forgotten past this. */
const MAX_VALUES = 8;

export function registerConfiguredSecret(value: string | undefined): void {
  if (value === undefined || value.length < MIN_LENGTH) return;
  for (const form of new Set([value, encodeURIComponent(value)])) {
    if (values.includes(form)) continue;
    values.push(form);
    if (values.length > MAX_VALUES) values.shift();
  }
}

/** Tests: forget every registered value. */
export function forgetConfiguredSecrets(): void {
  values.length = 0;
}

/** The text with each registered value (as written or percent-encoded) replaced by [REDACTED]: one native search each. */
export function redactConfiguredSecrets(text: string): string {
  let out = text;
  for (const value of values) if (out.includes(value)) out = out.replaceAll(value, REDACTED);
  return out;
}

/** Whether the text holds a registered value. */
export function holdsConfiguredSecret(text: string): boolean {
  return values.some((value) => text.includes(value));
}
