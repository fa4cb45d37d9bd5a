import { describe, expect, it } from 'vitest';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';

/** Credentials written percent-encoded, or split from their name by a tab, a pipe or a command line flag's blank. */
const SECRET = 'Wk9qR2mT7xLp4Vb8Nc1Hs6Dz3Fy5Ja0Qe';

const leaks = (text: string) => ({
  input: JSON.stringify(redactInput({ next: text })).includes(SECRET),
  output: JSON.stringify(redactOutput({ next: text })).includes(SECRET),
  log: loggableErrorText(new Error(text)).includes(SECRET),
});
const none = { input: false, output: false, log: false };
const text = (t: string) => redactSecretsInText(t, { cards: true });

describe('redaction: percent-encoded credentials', () => {
  it('an Authorization header percent-encoded in a URL', () => {
    expect(leaks(`https://requestbin.example/r?header=Authorization%3A%20Bearer%20${SECRET}`)).toEqual(none);
  });
  it('a bearer value after %20 or "+"', () => {
    expect(leaks(`https://x.example/cb?auth_header=Bearer%20${SECRET}`)).toEqual(none);
    expect(leaks(`h=Bearer+${SECRET}`)).toEqual(none);
  });
  it('a URL with a password percent-encoded in a query value: the value goes, the rest of the URL stays', () => {
    const out = text(`https://x.example/login?redirect_uri=https%3A%2F%2Fbob%3A${SECRET}%40db.example.com%2Fapp&lang=en`);
    expect(out).not.toContain(SECRET);
    expect(out).toContain('https://x.example/login?redirect_uri=');
    expect(out).toContain('lang=en');
  });
  it('percent-encoded JSON with a secret-named field, "+" read as a blank', () => {
    expect(leaks(`https://x.example/cb?state=${encodeURIComponent(JSON.stringify({ apiKey: SECRET }))}`)).toEqual(none);
    expect(leaks(`state=%7B%22password%22%3A+%22${SECRET}%22%7D`)).toEqual(none);
  });
  it('ordinary percent-encoded text stays as written', () => {
    for (const t of [
      'https://x.example/search?q=reset%20my%20account&page=2',
      'discount 100%25 off, 50% of orders',
      'https://x.example/a%2Fb?redirect_uri=https%3A%2F%2Fapp.example.com%2Fcallback',
      'name=Jos%C3%A9+Garc%C3%ADa&city=S%C3%A3o+Paulo',
    ]) expect(text(t)).toBe(t);
  });
  it('text without an escape is read once (no decoded pass)', () => {
    expect(text(`plain Bearer ${SECRET}`)).toBe(`plain Bearer ${REDACTED}`);
  });
});

describe('redaction: a secret name and its value split by a tab, a pipe or a flag blank', () => {
  it('TSV and table rows', () => {
    expect(leaks(`password\t${SECRET}`)).toEqual(none);
    expect(leaks(`user\tbob\napi_key\t${SECRET}\n`)).toEqual(none);
    expect(leaks(`| password | ${SECRET} |`)).toEqual(none);
    expect(leaks(`| Key | Value |\n|---|---|\n| API Key | ${SECRET} |`)).toEqual(none);
    expect(leaks(`  | client_secret |  ${SECRET}  |`)).toEqual(none);
  });
  it('a table keeps its other cells', () => {
    expect(text(`| user | bob |\n| password | ${SECRET} |`)).toBe(`| user | bob |\n| password | ${REDACTED} |`);
    expect(text(`user\tbob\npassword\t${SECRET}`)).toBe(`user\tbob\npassword\t${REDACTED}`);
  });
  it('prose and tables whose pipes or tabs do not pair a name with its value stay', () => {
    for (const t of [
      'Reset your password | Acme Help Center',
      'Settings | Password | Logout',
      '| name | password | email |',
      'id\tname\tstatus\n1\tbob\tactive',
      'a || b | c',
    ]) expect(text(t)).toBe(t);
  });
  it('a command line flag and its value', () => {
    expect(leaks(`mysql -u app --password ${SECRET} -h db`)).toEqual(none);
    expect(leaks(`deploy --api-key "${SECRET}" --verbose`)).toEqual(none);
    expect(text(`mysql -u app --password ${SECRET} -h db`)).toBe(`mysql -u app --password ${REDACTED} -h db`);
  });
  it('flags that are no secret, or a secret flag followed by another flag, stay', () => {
    for (const t of ['run --verbose --dry-run', 'npm install --save-dev typescript', 'login --password --stdin', 'a --password', 'x--token y']) expect(text(t)).toBe(t);
  });
  it('an argv list: the item after a secret flag item', () => {
    expect(redactInput({ args: ['--db-password', SECRET, '--verbose'] })).toEqual({ args: ['--db-password', REDACTED, '--verbose'] });
    expect(redactInput({ command: ['psql', '--password', SECRET] })).toEqual({ command: ['psql', '--password', REDACTED] });
    expect(redactInput({ args: ['--password', '--stdin', 'run'] })).toEqual({ args: ['--password', '--stdin', 'run'] });
    expect(redactInput({ args: ['--name', 'web', '--port', '80'] })).toEqual({ args: ['--name', 'web', '--port', '80'] });
  });
});

describe('redaction: the encoded and separated passes stay linear', () => {
  it('hostile runs of escapes, tabs, pipes and flags cost about what prose does', () => {
    const n = 10_000;
    const hostile = [
      '%41'.repeat(n / 3),
      'a%3D'.repeat(n / 4),
      `x${'a'.repeat(n - 4)}%41`,
      'password%3A%20'.repeat(n / 14),
      '%2F&'.repeat(n / 4),
      '\t'.repeat(n),
      'password\t'.repeat(n / 9),
      `|${'a'.repeat(n)}|`,
      '|password|'.repeat(n / 10),
      '| password | '.repeat(n / 13),
      `${'| '.repeat(n / 2)}`,
      '--'.repeat(n / 2),
      '--password '.repeat(n / 11),
      `--password '${'a'.repeat(n)}`,
      `--password "${' --token "'.repeat(n / 10)}`,
      `${'a'.repeat(n)}--token`,
    ];
    expectNoWorseThanProse(hostile, (t) => redactInput({ t }));
    expectNoWorseThanProse(hostile, (t) => redactOutput({ t }));
  });
});
