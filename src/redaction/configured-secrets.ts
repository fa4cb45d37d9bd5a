import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { REDACTED } from './markers.js';

/**
 * Secrets the gateway is configured with that have no shape of their own: BOOTSTRAP_ADMIN_KEY may be any 32-512
 * printable characters (an operator's `openssl rand -hex 32`), not the tgw_ shape a minted key has (token-shapes.ts).
 * Registered while an app configured with them runs (ConfiguredSecretsHold), they are redacted by value, as written and
 * percent-encoded, wherever text is redacted (redactSecretsInText: params, results, log lines, request paths), and an
 * identifier holding one is refused as one holding a minted key is (holdsCredentialShape).
 *
 * Each registered form with how many registrations hold it (each running app holds its own). */
const values = new Map<string, number>();
/** Shorter values are no key (the configuration refuses them) and would hide ordinary words. */
const MIN_LENGTH = 16;

/**
 * Registers a configured secret for as long as the app that holds it runs (ConfiguredSecretsHold): the returned
 * function takes it back. Held by the running app, not by every configuration parsed (a test, a CLI reading
 * another's settings): text that merely resembles an unused configuration is left alone.
 */
export function registerConfiguredSecret(value: string | undefined): () => void {
  if (value === undefined || value.length < MIN_LENGTH) return () => undefined;
  const forms = [...new Set([value, encodeURIComponent(value)])];
  for (const form of forms) values.set(form, (values.get(form) ?? 0) + 1);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    for (const form of forms) {
      const n = (values.get(form) ?? 1) - 1;
      if (n <= 0) values.delete(form);
      else values.set(form, n);
    }
  };
}

/** Tests: forget every registered value. */
export function forgetConfiguredSecrets(): void {
  values.clear();
}

/** The text with each registered value (as written or percent-encoded) replaced by [REDACTED]: one native search each. */
export function redactConfiguredSecrets(text: string): string {
  let out = text;
  for (const value of values.keys()) if (out.includes(value)) out = out.replaceAll(value, REDACTED);
  return out;
}

/** Whether the text holds a registered value. */
export function holdsConfiguredSecret(text: string): boolean {
  for (const value of values.keys()) if (text.includes(value)) return true;
  return false;
}

/** Holds the app's configured secrets registered for redaction while it runs (CoreModule). */
@Injectable()
export class ConfiguredSecretsHold implements OnModuleDestroy {
  private readonly release: () => void;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.release = registerConfiguredSecret(config.BOOTSTRAP_ADMIN_KEY);
  }

  onModuleDestroy(): void {
    this.release();
  }
}
