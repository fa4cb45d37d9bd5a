import { ValidateBy, type ValidationOptions } from 'class-validator';
import { JWT, PRIVATE_KEY_BLOCK, VENDOR_TOKEN_HEAD, VENDOR_TOKENS } from './token-shapes.js';

/**
 * A Bearer credential as a header or a log line writes it: the scheme (any case: RFC 9110 §11.1), then a token68 of 20
 * characters or more holding a letter and a digit. Not redaction's BEARER (8 characters, any): "Ring bearer
 * invitations" or "standard bearer campaign-2024" is an ordinary conversation id.
 */
const BEARER_VALUE = /\bbearer +(?=[A-Za-z0-9\-._~+/]*[0-9])(?=[A-Za-z0-9\-._~+/]*[A-Za-z])[A-Za-z0-9\-._~+/]{20,}=*/i;

export function holdsCredentialShape(text: string): boolean {
  if (text.includes('PRIVATE KEY') && text.replace(PRIVATE_KEY_BLOCK, '') !== text) return true;
  if (BEARER_VALUE.test(text)) return true;
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
