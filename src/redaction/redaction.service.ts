import { Injectable } from '@nestjs/common';
import { cutToCodePoints } from '../common/http/code-point-length.js';
import { REDACTION_LIMITS, Walker } from './value-walker.js';

export { CIRCULAR, REDACTED, TRUNCATED } from './markers.js';
export { REDACTION_LIMITS } from './value-walker.js';

/** Secrets in params, before they are written to the ledger. */
export function redactInput(value: unknown): unknown {
  return new Walker('input').root(value);
}

/**
 * Secrets in a run's metadata, the agent's own free-form JSON, capped at `maxBytes` of it when it is accepted: redacted
 * as a tool's input is, but with no string, array or output cut below that cap (what is not a secret is kept whole).
 */
export function redactMetadata(value: unknown, maxBytes: number): unknown {
  const whole = { ...REDACTION_LIMITS, maxStringLength: maxBytes, maxArrayItems: maxBytes, maxOutputChars: Math.max(REDACTION_LIMITS.maxOutputChars, 2 * maxBytes) };
  return new Walker('input', whole).root(value);
}

/**
 * Secrets in free text a person or an agent wrote that is kept and shown back (a run's end reason, an approval's
 * decision reason, a reconcile note): a credential pasted into it goes as it would from a tool's input.
 */
export function redactFreeText(text: string): string {
  const out = redactInput(text);
  return typeof out === 'string' ? out : String(out);
}

/**
 * redactFreeText for a text whose length is limited (a flag's or a policy rule's reason, an org's or a key's name),
 * cut to `max` characters (code points; "…" marks the cut) when redaction made it longer: `pin: 4821` becomes
 * `pin: [REDACTED]`, and a text sent within the limit must be taken, and kept within it (a stored policy is read back
 * through the same limit). Cut after redaction, so the cut never exposes part of a secret recognised whole.
 */
export function redactFreeTextWithin(text: string, max: number): string {
  return cutToCodePoints(redactFreeText(text), max);
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
