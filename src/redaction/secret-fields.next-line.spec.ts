import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';

/**
 * A secret name whose value stands on the next line: "Password:\nhunter2" (a form or a page copied as text, a YAML
 * key over its value, a header folded by a mail client), also escaped inside a JSON string ("Password:\\nhunter2").
 * One line break is crossed, never two, and a next line that opens a field of its own is that field's.
 */
const both = (text: string): [unknown, unknown] => [redactInput({ note: text }), redactOutput({ note: text })];

describe('a secret value on the line after its name', () => {
  it.each([
    ['Password:\nhunter2xyz', `Password:\n${REDACTED}`],
    ['API Key:\r\nblue-sky-42', `API Key:\r\n${REDACTED}`],
    ['X-Api-Key:\n blue-sky-42', `X-Api-Key:\n ${REDACTED}`],
    ['Password:\rhunter2xyz', `Password:\r${REDACTED}`],
    ['Password:  \t\n\t  hunter2xyz and more', `Password:  \t\n\t  ${REDACTED} and more`],
    ['API\u00a0Key:\nblue-sky-42', `API\u00a0Key:\n${REDACTED}`],
    ['login\nPassword:\nhunter2xyz\nUsername: bob', `login\nPassword:\n${REDACTED}\nUsername: bob`],
    // the value rules of the same line: quotes, brackets, a token
    ['password:\n  "hunter2 xyz"', `password:\n  "${REDACTED}"`],
    ['client_secret:\n  [s3cr3t-a, s3cr3t-b]', `client_secret:\n  ${REDACTED}`],
    ['api_key:\n  admin:hunter2xyz', `api_key:\n  ${REDACTED}`],
    ['api_keys:\n  - blue-sky-42', `api_keys:\n  - ${REDACTED}`],
    // a cookie runs to its line end
    ['Cookie:\r\nsid=abc123; csrftoken=def456\r\nHost: example.com', `Cookie:\r\n${REDACTED}\r\nHost: example.com`],
    // Authorization, whose same-line value redactAuthorizationValues takes: on the next line it is taken here
    ['Authorization:\n4f9a8b7c6d5e4f3a2b1c', `Authorization:\n${REDACTED}`],
    ['Proxy-Authorization:\r\nBasic dXNlcjpwYXNz', `Proxy-Authorization:\r\n${REDACTED}`],
  ])('%j', (text, redacted) => {
    expect(both(text)).toEqual([{ note: redacted }, { note: redacted }]);
  });

  it.each([
    ['Password:\\nhunter2xyz', `Password:\\n${REDACTED}`],
    ['X-Api-Key:\\r\\n  blue-sky-42\\r\\nAccept: */*', `X-Api-Key:\\r\\n  ${REDACTED}\\r\\nAccept: */*`],
    ['{\\"password\\":\\n\\"hunter2 xyz\\"}', `{\\"password\\":\\n\\"${REDACTED}\\"}`],
    ['Password:\\rhunter2xyz', `Password:\\r${REDACTED}`],
  ])('escaped inside a JSON string: %j', (text, redacted) => {
    expect(both(text)).toEqual([{ note: redacted }, { note: redacted }]);
  });

  it('a JSON document held in a string', () => {
    const doc = JSON.stringify({ form: 'Password:\r\nhunter2xyz', yaml: 'db:\n  api_key:\n    blue-sky-42\n  host: db' });
    expect(redactInput({ body: doc })).toEqual({
      body: JSON.stringify({ form: `Password:\r\n${REDACTED}`, yaml: `db:\n  api_key:\n    ${REDACTED}\n  host: db` }),
    });
  });

  it.each([
    // a blank line ends the field
    'Password:\n\nhunter2xyz',
    'Password:\r\n \r\nhunter2xyz',
    'Password:\\n\\nhunter2xyz',
    // the next line opens a field of its own, which keeps its value or loses it by its own name
    'Password:\nUsername: bob',
    'X-Api-Key:\r\nHost: example.com',
    'Cookie:\r\nHost: example.com',
    'password:\n"username": "bob"',
    // values kept under a secret name on the same line are kept on the next
    'password:\n  null',
    `password:\n  ${REDACTED}`,
    // not a secret name
    'Status:\nhunter2xyz',
    'Primary Key:\n12345',
    'a\u00a0Key:\n12345',
  ])('%j stays', (text) => {
    expect(both(text)).toEqual([{ note: text }, { note: text }]);
  });

  it('the next field is still redacted by its own name', () => {
    expect(both('Password:\nToken: abc123xyz')).toEqual([{ note: `Password:\nToken: ${REDACTED}` }, { note: `Password:\nToken: ${REDACTED}` }]);
    expect(redactOutput({ note: 'Password:\n"token": "abc123xyz"' })).toEqual({ note: `Password:\n"token": "${REDACTED}"` });
    expect(redactOutput({ note: 'Password:\nToken:\nabc123xyz' })).toEqual({ note: `Password:\nToken:\n${REDACTED}` });
  });
});
