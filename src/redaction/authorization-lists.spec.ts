/**
 * An Authorization header whose value is a list: Go prints http.Header with %v as map[Authorization:[Bearer …]], and
 * json.Marshal writes it as {"Authorization":["SSWS …"]}. The whole list goes, whatever its scheme, in input, output
 * and the log line of an error alike.
 */
import { describe, expect, it } from 'vitest';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

const NANGO_KEY = 'b2f4c6d8-1a3e-4f5b-9c7d-0e2f4a6b8c0d';
const BASIC = Buffer.from('jumio-client-id:jumio-client-secret-0123').toString('base64');
const OKTA = '00Qh7Gk2J8xYbV1aZ3mN5pR7tU9wX1yZ3aB5cD7eF9';

describe('redactSecretsInText: an Authorization value written as a list', () => {
  it.each([
    [
      'a Go header map, Bearer',
      `map[Accept:[application/json] Authorization:[Bearer ${NANGO_KEY}] Connection-Id:[c1]]`,
      `map[Accept:[application/json] Authorization:${REDACTED} Connection-Id:[c1]]`,
    ],
    ['a Go header map, Basic client credentials', `map[Authorization:[Basic ${BASIC}] Content-Type:[text/plain]]`, `map[Authorization:${REDACTED} Content-Type:[text/plain]]`],
    ['a Go header map, a bare token', `map[Authorization:[${NANGO_KEY}]]`, `map[Authorization:${REDACTED}]`],
    ['a Go header map, two values', `map[Authorization:[Bearer ${NANGO_KEY} Basic ${BASIC}] X:[y]]`, `map[Authorization:${REDACTED} X:[y]]`],
    ['Proxy-Authorization in a Go header map', `map[Proxy-Authorization:[Basic ${BASIC}]]`, `map[Proxy-Authorization:${REDACTED}]`],
    ['http.Header as JSON, SSWS', `{"Authorization":["SSWS ${OKTA}"],"Accept":["application/json"]}`, `{"Authorization":${REDACTED},"Accept":["application/json"]}`],
    ['http.Header as JSON, a bare token', `{"Authorization":["${NANGO_KEY}"]}`, `{"Authorization":${REDACTED}}`],
    ['http.Header as JSON, blanks around', `{"Authorization": [ "Bearer ${NANGO_KEY}" ]}`, `{"Authorization": ${REDACTED}}`],
    ['a Python dict of lists', `{'Authorization': ['Token ${NANGO_KEY}']}`, `{'Authorization': ${REDACTED}}`],
    ['JSON encoded twice', `{\\"Authorization\\":[\\"SSWS ${OKTA}\\"]}`, `{\\"Authorization\\":${REDACTED}}`],
    ['a list never closed', `headers map[Authorization:[Bearer ${NANGO_KEY}`, `headers map[Authorization:${REDACTED}`],
  ])('%s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
    // Redacting again changes nothing.
    expect(secrets(expected)).toBe(expected);
  });

  it('the single-value forms keep their scheme as before', () => {
    expect(secrets(`Authorization: Bearer ${NANGO_KEY}`)).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(secrets(`{"Authorization":"SSWS ${OKTA}"}`)).toBe(`{"Authorization":"SSWS ${REDACTED}"}`);
  });
});

describe('an Authorization list through the ledger and the log', () => {
  const bearer = `upstream said 401; request headers: map[Accept:[application/json] Authorization:[Bearer ${NANGO_KEY}] Connection-Id:[c1]]`;
  const basic = `token request failed, headers map[Authorization:[Basic ${BASIC}] Content-Type:[application/x-www-form-urlencoded]]`;
  const okta = `{"Authorization":["SSWS ${OKTA}"],"Accept":["application/json"]}`;

  it('input, output and loggableErrorText lose the credentials and keep the other headers', () => {
    for (const [text, secret] of [
      [bearer, NANGO_KEY],
      [basic, BASIC],
      [okta, OKTA],
    ] as const) {
      const input = JSON.stringify(redactInput({ body: { note: text } }));
      const output = JSON.stringify(redactOutput({ error: text }));
      const logged = loggableErrorText(new Error(text));
      for (const recorded of [input, output, logged]) {
        expect(recorded).not.toContain(secret);
        expect(recorded).toContain('Authorization');
      }
    }
    expect(loggableErrorText(new Error(bearer))).toBe(`upstream said 401; request headers: map[Accept:[application/json] Authorization:${REDACTED} Connection-Id:[c1]]`);
  });
});

describe('cost', () => {
  it('unclosed and empty Authorization lists cost about what prose does', () => {
    const hostile = ['Authorization:['.repeat(6_000), '"Authorization":["'.repeat(5_000), 'map[Authorization:[] '.repeat(4_000), `Authorization:[${'['.repeat(90_000)}`];
    expectNoWorseThanProse(hostile, secrets);
  });
});
