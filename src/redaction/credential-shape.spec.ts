import { describe, expect, it } from 'vitest';
import { holdsCredentialShape } from './credential-shape.js';

describe('holdsCredentialShape', () => {
  it('finds a vendor token, a JWT, a Bearer value, a private key or a gateway key anywhere in an identifier', () => {
    for (const text of [
      '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',
      'run-1: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',
      'Atza|IwEBIExampleAccessToken',
      'idem-Atzr%7Cabcdef',
      'tgw_' + 'A'.repeat(43),
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl',
      'Bearer abcdefgh12345678abcdefgh',
      'authorization: bearer 0a1B2c3D4e5F6g7H8i9J0k1L', // any case, as log lines and proxies write it
      'BEARER 0a1B2c3D4e5F6g7H8i9J0k1L',
      '-----BEGIN PRIVATE KEY-----MIIB',
      'sk_live_' + 'a'.repeat(24),
    ]) {
      expect(holdsCredentialShape(text), text).toBe(true);
    }
  });

  it('leaves ordinary identifiers alone: tool_use ids, UUIDs, keys with digits and key=value forms', () => {
    for (const text of [
      'toolu_01A09q90qw90lq917835lq9',
      'call_abc123XYZ',
      '8c4f5a0e-2b6d-4f3a-9e1c-7d2b5a4c3e1f',
      'order-12-3456789', // a tax id's shape: redaction's heuristics are not used here
      'retry:token=5',
      'support-specialist',
      'shpat_short', // a head without a token's length
      'Bearer', // a word, not a value
      'Ring bearer invitations', // the word in a sentence
      'standard bearer campaign-2024',
      'Bearer of news 12345', // a short value
      'bearer invitations-for-the-whole-family', // words: no digit
      'standard bearer campaign-2024-spring-sale', // a slug of words and numbers
      'Ring bearer invitations-for-the-whole-family-2024',
      'x'.repeat(255),
    ]) {
      expect(holdsCredentialShape(text), text).toBe(false);
    }
  });
});
