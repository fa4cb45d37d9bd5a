/**
 * Every secret the test suite uses. The leak scans search logs, ledger rows,
 * events, responses and metrics for each of these strings.
 *
 * Vendor secrets have their vendor's real shape (src/redaction/patterns.ts
 * VENDOR_TOKENS), so that one in free text, where no key names it, is
 * redacted by its format. The emulator's own constants (src/emulator) hold
 * the same values.
 */
export const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
export const TEST_MASTER_KEY_2 = Buffer.alloc(32, 9).toString('base64');
export const TEST_ADMIN_KEY = 'tgw_test-bootstrap-admin-key-0123456789abcdef';
export const SHOPIFY_TOKEN = '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';
export const SHOPIFY_CLIENT_ID = '8f14e45fceea167a5a36dedd4bea2543';
export const SHOPIFY_CLIENT_SECRET = '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';
export const SHOPIFY_REFRESH_TOKEN = 'shprt_9c2e5b1f7a3d4e6081b2c3d4e5f60001';
export const AMAZON_CLIENT_ID = 'amzn1.application-oa2-client.emulator';
export const AMAZON_CLIENT_SECRET = 'amzn1.oa2-cs.v1.7f3e9a2c5b1d4e6f8091a2b3c4d5e6f7081928374655647382910a1b2c3d0001';
export const AMAZON_REFRESH_TOKEN = 'Atzr|emulator-refresh-token-0001';
export const JUMIO_CLIENT_ID = 'jumio-emulator-client';
/** Jumio publishes no format for client secrets: a random-looking alphanumeric string, which no pattern recognises. */
export const JUMIO_CLIENT_SECRET = 'JumioEmuSecret7qR2vX9mB4nL8pW3tY';
export const NANGO_SECRET_KEY = '1b4f3c2a-8d7e-4f6a-9b0c-2d3e4f5a6b7c';

/** The same secrets by their variable names: the run-wide leak scan names what it found, never the value. */
export const NAMED_TEST_SECRETS: Readonly<Record<string, string>> = {
  TEST_MASTER_KEY,
  TEST_MASTER_KEY_2,
  TEST_ADMIN_KEY,
  SHOPIFY_TOKEN,
  SHOPIFY_CLIENT_SECRET,
  SHOPIFY_REFRESH_TOKEN,
  AMAZON_CLIENT_SECRET,
  AMAZON_REFRESH_TOKEN,
  JUMIO_CLIENT_SECRET,
  NANGO_SECRET_KEY,
};

export const ALL_TEST_SECRETS: string[] = Object.values(NAMED_TEST_SECRETS);
