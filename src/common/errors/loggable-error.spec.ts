import { describe, expect, it } from 'vitest';
import { LOGGABLE_MESSAGE_MAX, loggableErrorText, loggableErrorWithStack } from './loggable-error.js';

const SHOPIFY_TOKEN = 'shpat_0123456789abcdef0123456789abcdef';
const BEARER_TOKEN = 'abcDEF0123456789ghiJKL0123456789';

/** The error JSON.parse really throws on `text` (its message quotes part of the text). */
function parseError(text: string): Error {
  try {
    JSON.parse(text);
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected JSON.parse to throw');
}

/** The shape node-postgres gives a server error. */
const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('loggableErrorText', () => {
  it('drops the input JSON.parse quotes: not even a fragment of a token in a vendor body is left', () => {
    for (const body of [SHOPIFY_TOKEN, `x=${SHOPIFY_TOKEN}`, `{"access_token": ${SHOPIFY_TOKEN}}`, `["ok", ${SHOPIFY_TOKEN}]`]) {
      const err = parseError(body);
      expect(err.message).toContain('shpat_'); // what the raw message would have logged
      const text = loggableErrorText(err);
      expect(text, body).not.toContain('shpat_');
      expect(text).toMatch(/^SyntaxError: .*\[input not shown\] is not valid JSON$/);
    }
    // A message that quotes nothing is kept whole.
    expect(loggableErrorText(parseError('{"a": 1'))).toMatch(/^SyntaxError: (Expected|Unexpected end)/);
  });

  it('redacts a Bearer token in a pg-like message and keeps the class name and the SQLSTATE', () => {
    const err = Object.assign(pgError('22P02', `invalid input syntax for type uuid: "Bearer ${BEARER_TOKEN}"`), { name: 'QueryFailedError' });
    const text = loggableErrorText(err);
    expect(text).not.toContain(BEARER_TOKEN);
    expect(text).toBe('QueryFailedError: invalid input syntax for type uuid: "[value not shown]" (code 22P02)');
    // Not a data exception: the message stays, and the token shape is redacted.
    const other = loggableErrorText(pgError('XX000', `failed near Authorization: Bearer ${BEARER_TOKEN} ok`));
    expect(other).not.toContain(BEARER_TOKEN);
    expect(other).toContain('failed near');
    expect(other).toMatch(/\(code XX000\)$/);
  });

  it('hides a data exception value of no known shape, quotes inside it included', () => {
    const text = loggableErrorText(pgError('22P02', 'invalid input syntax for type integer: "my"secret"value"'));
    expect(text).toBe('invalid input syntax for type integer: "[value not shown]" (code 22P02)');
    // The code of a wrapped driver error counts too.
    const wrapped = Object.assign(new Error('invalid input value for enum status: "hunter2"'), { driverError: { code: '22P02' } });
    expect(loggableErrorText(wrapped)).not.toContain('hunter2');
  });

  it('redacts a token in a URL query and credentials in a URL', () => {
    const text = loggableErrorText(new TypeError(`fetch failed for https://shop.example/api?access_token=${BEARER_TOKEN}&x=1 via https://user:pa55word@proxy.example/`));
    expect(text).not.toContain(BEARER_TOKEN);
    expect(text).not.toContain('pa55word');
    expect(text).toMatch(/^TypeError: fetch failed for https:\/\/shop\.example\/api\?access_token=/);
  });

  it('caps the length, after redaction (a token at the cut is not left half shown)', () => {
    const long = `${'x'.repeat(LOGGABLE_MESSAGE_MAX - 10)} ${SHOPIFY_TOKEN} ${'y'.repeat(20_000)}`;
    const text = loggableErrorText(new Error(long));
    expect(text.length).toBeLessThanOrEqual(LOGGABLE_MESSAGE_MAX + 1);
    expect(text).not.toContain('shpat_0');
  });

  it('a secret at the redaction cut stays hidden when redaction before the cut shortened the text (a PEM block)', () => {
    const url = 'postgres://admin:SuperSecretPass99@db.internal:5432/app';
    const head = 'config dump: -----BEGIN PRIVATE KEY-----\n';
    const tail = '\n-----END PRIVATE KEY----- dsn=';
    const body = 'A'.repeat(10_000 - head.length - tail.length - url.indexOf('@'));
    const message = `${head}${body}${tail}${url}`;
    expect(message.indexOf('@')).toBe(10_000); // the "@" just past the cut, the password before it
    // Whether the message ends there or goes on well past what redaction reads.
    for (const text of [message, `${message} ${'z '.repeat(10_000)}`]) {
      const logged = loggableErrorText(new Error(text));
      expect(logged).toMatch(/^config dump: \[REDACTED\] dsn=/);
      expect(logged).not.toContain('SuperSecret');
      expect(logged.length).toBeLessThanOrEqual(LOGGABLE_MESSAGE_MAX + 1);
      expect(loggableErrorWithStack(new Error(text)).message).not.toContain('SuperSecret');
    }
  });

  it('describes what is no Error, and a name that is no class name is not shown', () => {
    expect(loggableErrorText(`boom with ${SHOPIFY_TOKEN}`)).toBe('boom with [REDACTED]');
    expect(loggableErrorText(42)).toBe('42');
    expect(loggableErrorText(Object.create(null))).toBe('a thrown object');
    const named = Object.assign(new Error('m'), { name: `Bearer ${BEARER_TOKEN}` });
    expect(loggableErrorText(named)).toBe('m');
  });
});

describe('loggableErrorWithStack', () => {
  it('replaces the message lines of the stack with the redacted headline and keeps the frames', () => {
    const err = new Error(`GET https://shop.example/orders?access_token=${SHOPIFY_TOKEN}\nsecond line Bearer ${BEARER_TOKEN}`);
    expect(err.stack).toContain(SHOPIFY_TOKEN);
    const logged = loggableErrorWithStack(err);
    const all = JSON.stringify(logged);
    expect(all).not.toContain(SHOPIFY_TOKEN);
    expect(all).not.toContain(BEARER_TOKEN);
    expect(logged.name).toBe('Error');
    const lines = logged.stack!.split('\n');
    expect(lines[0]).toBe(logged.message.split('\n')[0]);
    expect(lines.some((l) => /^\s+at .*loggable-error\.spec/.test(l))).toBe(true); // where it was thrown
    expect(lines.filter((l) => !/^\s+at /.test(l))).toEqual(logged.message.split('\n'));
  });

  it('a frame longer than the cap does not show a secret the cap would cut in half', () => {
    const frame = `    at connect (${'x'.repeat(450)} postgres://admin:SuperSecretPass99@db.internal:5432/app)`;
    expect(frame.indexOf('SuperSecret')).toBeLessThan(LOGGABLE_MESSAGE_MAX);
    expect(frame.indexOf('@')).toBeGreaterThan(LOGGABLE_MESSAGE_MAX);
    const err = Object.assign(new Error('connect failed'), { stack: `Error: connect failed\n${frame}\n    at main (app.js:1:1)` });
    const lines = loggableErrorWithStack(err).stack!.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(/^ {4}at connect \(x+ postgres:\/\/admin:/);
    expect(lines[1]).not.toContain('Super');
    expect(lines[2]).toBe('    at main (app.js:1:1)');
  });

  it('keeps the pg code, and has no stack for what is no Error', () => {
    expect(loggableErrorWithStack(pgError('23505', 'duplicate key value violates unique constraint "api_keys_pkey"'))).toMatchObject({
      code: '23505',
      message: 'duplicate key value violates unique constraint "api_keys_pkey"',
    });
    expect(loggableErrorWithStack('plain')).toEqual({ message: 'plain' });
  });
});
