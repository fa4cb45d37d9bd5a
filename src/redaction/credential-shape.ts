import { ValidateBy, type ValidationOptions } from 'class-validator';
import { holdsConfiguredSecret } from './configured-secrets.js';
import { JWT, PRIVATE_KEY_BLOCK, VENDOR_TOKEN_HEAD, VENDOR_TOKENS } from './token-shapes.js';

/**
 * A Bearer credential as a header or a log line writes it: the scheme (any case: RFC 9110 §11.1), then a token68 of 20
 * characters or more holding a letter and a digit that is not a slug of words and numbers. Not redaction's BEARER (8
 * characters, any): "Ring bearer invitations" or "standard bearer campaign-2024-spring-sale" is an ordinary
 * conversation id.
 */
const BEARER_VALUE = /\bbearer +((?=[A-Za-z0-9\-._~+/]*[0-9])(?=[A-Za-z0-9\-._~+/]*[A-Za-z])[A-Za-z0-9\-._~+/]{20,}=*)/gi;
/** A slug, not a token: words and numbers joined by - _ . (campaign-2024-spring-sale), each all letters of one case or all digits. */
const SLUG = /^(?:[a-z]+|[A-Z]+|[0-9]+)(?:[-_.](?:[a-z]+|[A-Z]+|[0-9]+))+$/;
const bearerValue = (text: string): boolean => [...text.matchAll(BEARER_VALUE)].some((m) => !SLUG.test(m[1]!));

/**
 * Whether `text` holds a credential recognised by its shape alone: a vendor token (shpat_…, Atza|…, this gateway's
 * tgw_…), a JWT, a Bearer value, a private key. For identifiers a client chooses (a tool_use id, an Idempotency-Key, a
 * run's specialistId): they are stored, hash-chained into ledger events and shown back as sent, never redacted — an
 * identifier is matched as it is — so one that holds a secret is refused instead. Only shapes: never a heuristic (a
 * tax id's digits or a `key=value` form are ordinary in an identifier).
 */
export function holdsCredentialShape(text: string): boolean {
  // A configured BOOTSTRAP_ADMIN_KEY has no shape of its own: known by its value (configured-secrets.ts).
  if (holdsConfiguredSecret(text)) return true;
  if (text.includes('PRIVATE KEY') && text.replace(PRIVATE_KEY_BLOCK, '') !== text) return true;
  if (bearerValue(text)) return true;
  if (text.includes('eyJ') && text.replace(JWT, '') !== text) return true;
  return VENDOR_TOKEN_HEAD.test(text) && VENDOR_TOKENS.some((pattern) => text.replace(pattern, '') !== text);
}

/** The words a refusal uses (never the value). */
export const HOLDS_CREDENTIAL = 'must not hold a credential (it has the shape of an access token or key); identifiers are stored and shown as sent';

/** class-validator: a string that holds no credential (holdsCredentialShape); other types are left to the other rules. */
export function NoCredentialShape(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'noCredentialShape',
      validator: {
        validate: (value: unknown) => typeof value !== 'string' || !holdsCredentialShape(value),
        defaultMessage: (args) => `${args?.property ?? 'value'} ${HOLDS_CREDENTIAL}`,
      },
    },
    options,
  );
}
