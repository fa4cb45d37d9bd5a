import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';
import { keyWords, normalizeKey } from './redaction-keys.js';
import { isSecretFieldName, isSecretName } from './secret-keys.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

describe('a name/value pair whose name is a path (SSM, Vault)', () => {
  it.each(['/prod/db/password', 'prod/stripe/api_key', '/prod/app/client-secret/'])('redacts the value under %j, in input and output', (name) => {
    const params = { Parameters: [{ Name: name, Type: 'SecureString', Value: 'hunter2' }] };
    const expected = { Parameters: [{ Name: name, Type: 'SecureString', Value: REDACTED }] };
    expect(redactOutput(params)).toEqual(expected);
    expect(redactInput(params)).toEqual(expected);
  });

  it.each(['/prod/db/host', '/prod/secret/region', 'https://x.com/oauth/token'])('keeps the value under %j: the last segment names it', (name) => {
    expect(isSecretFieldName(name)).toBe(false);
    expect(redactOutput({ Parameters: [{ Name: name, Value: 'db.internal' }] })).toEqual({ Parameters: [{ Name: name, Value: 'db.internal' }] });
  });
});

describe('a name/value pair whose name is a label with blanks', () => {
  it.each([
    ['label', 'API Key'],
    ['label', 'api  key'],
    ['title', 'Client Secret'],
    ['name', 'Access Token'],
    ['label', 'Your password'],
  ])('redacts the value under %s %j', (nameKey, label) => {
    expect(redactInput({ fields: [{ [nameKey]: label, value: 'abc123def456' }] })).toEqual({ fields: [{ [nameKey]: label, value: REDACTED }] });
  });

  it.each(['Token Pack', 'Secret Santa', 'Season Pass', 'Enamel Pin', 'Gift Tin', 'Fortune Cookie', 'Secret Message', 'Prompt Tokens', 'Next Page Token'])(
    'keeps the value under a label %j (product options and line-item properties reach these pairs)',
    (label) => {
      expect(redactOutput({ properties: [{ name: label, value: 'Blue' }] })).toEqual({ properties: [{ name: label, value: 'Blue' }] });
      expect(redactInput({ fields: [{ label, value: 'Blue' }] })).toEqual({ fields: [{ label, value: 'Blue' }] });
    },
  );

  it('a label or title alone is no pair', () => {
    expect(redactOutput({ details: { label: 'WARNING' }, title: 'Password reset' })).toEqual({ details: { label: 'WARNING' }, title: 'Password reset' });
  });
});

describe('counters of tokens and page cursors are no tokens', () => {
  it('keeps the usage of a language model, in output and input', () => {
    const usage = {
      prompt_tokens: 12,
      completion_tokens: 5,
      total_tokens: 17,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 3, accepted_prediction_tokens: 0 },
      input_tokens: 10,
      cache_read_input_tokens: 4,
      promptTokenCount: 12,
      totalTokenCount: 17,
    };
    expect(redactOutput({ usage })).toEqual({ usage });
    expect(redactInput({ max_tokens: 100, max_output_tokens: 200, maxTokens: 50 })).toEqual({ max_tokens: 100, max_output_tokens: 200, maxTokens: 50 });
  });

  it.each(['pageToken', 'nextPageToken', 'next_page_token', 'NextToken', 'ContinuationToken', 'NextContinuationToken', 'prevPageToken'])('keeps the page cursor %s', (key) => {
    expect(redactInput({ query: { [key]: 'CAoQAA' } })).toEqual({ query: { [key]: 'CAoQAA' } });
    expect(redactOutput({ [key]: 'CAoQAA' })).toEqual({ [key]: 'CAoQAA' });
  });

  it('keeps them in text too', () => {
    for (const text of ['usage total_tokens: 17', '?max_tokens=100&pageToken=CAoQAA', '"NextToken": "eyZ0b2tlbn0"']) expect(secrets(text)).toBe(text);
  });

  it.each([
    'access_tokens',
    'tokens',
    'device_tokens',
    'refresh_tokens',
    'api_tokens',
    'secret_tokens_count',
    'page_access_token',
    'syncToken',
    'sessionToken',
    'tokens_secret',
    'next_page_token_secret',
  ])('still redacts %s: it holds tokens', (key) => {
    expect(isSecretName(key)).toBe(true);
    expect(redactInput({ [key]: ['abc123'] })).toEqual({ [key]: REDACTED });
  });

  it('reads a name spelt with a dotted capital I or accents as its plain letters (userPİN is userPIN: İ lower-cases to "i" and a combining dot)', () => {
    expect(normalizeKey('userPİN')).toBe(normalizeKey('userPIN'));
    expect(keyWords('userPİN')).toEqual(['user', 'pin']);
    expect(keyWords('ＤＢ＿ＰＡＳＳ')).toEqual(['db', 'pass']);
    expect(normalizeKey('pässword')).toBe('password');
    for (const key of ['userPİN', 'PİN', 'cardPİNCode', 'pässword', 'ｐａｓｓｗｏｒｄ']) expect(redactInput({ [key]: '4821' }), key).toEqual({ [key]: REDACTED });
  });
});
