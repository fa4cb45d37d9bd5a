/**
 * Secrets and personal data written with non-ASCII forms: no-break and thin spaces, Unicode dashes, decimal digits of
 * other scripts, and key names spelled with Cyrillic or Greek letters drawn like Latin ones.
 */
import { describe, expect, it } from 'vitest';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { REDACTED } from './markers.js';
import { normalizeKey } from './redaction-keys.js';
import { redactInput, redactOutput } from './redaction.service.js';
import { FoldedText, foldForms } from './unicode-forms.js';

const NBSP = '\u00a0';
const THIN = '\u2009';
const BASIC = Buffer.from('client-id:client-secret-0123').toString('base64');
const TOKEN = 'abcdefgh12345678abcd';
/** The text as input and output redaction record it, and as an error's log line shows it. */
const recorded = (text: string): string[] => [
  JSON.stringify(redactInput({ note: text })),
  JSON.stringify(redactOutput({ note: text })),
  loggableErrorText(new Error(text)),
];

describe('unicode forms: an Authorization value with a no-break or thin space after the scheme', () => {
  it.each([
    ['Basic + NBSP', `401 upstream; sent Authorization: Basic${NBSP}${BASIC}`, BASIC],
    ['Bearer + NBSP', `sent Authorization: Bearer${NBSP}${TOKEN}`, TOKEN],
    ['Token + NBSP', `Authorization: Token${NBSP}${TOKEN}`, TOKEN],
    ['Bearer + thin space in a curl line', `curl -H "Authorization: Bearer${THIN}${TOKEN}"`, TOKEN],
    ['NBSP after the colon too', `Authorization:${NBSP}Token${NBSP}${TOKEN}`, TOKEN],
    ['Digest auth-params after a NBSP', `Authorization: Digest${NBSP}username="bob", response="${TOKEN}"`, TOKEN],
    ['Basic + NBSP outside a header', `use Basic${NBSP}${BASIC} for it`, BASIC],
  ])('%s: the credential reaches neither input, output nor the log line', (_what, text, secret) => {
    for (const r of recorded(text)) expect(r).not.toContain(secret);
  });

  it('the scheme stays, as it does after an ASCII space', () => {
    expect(redactInput({ note: `Authorization: Bearer${NBSP}${TOKEN}` })).toEqual({ note: `Authorization: Bearer ${REDACTED}` });
    expect(redactInput({ note: `Authorization: Token${NBSP}${TOKEN}` })).toEqual({ note: `Authorization: Token${NBSP}${REDACTED}` });
  });
});

describe('unicode forms: "secret-name: value" with a no-break space around the operator', () => {
  it.each([
    ['password: NBSP', `password:${NBSP}hunter2secret`, 'hunter2secret'],
    ['password NBSP = NBSP', `password${NBSP}=${NBSP}hunter2secret`, 'hunter2secret'],
    ['X-Api-Key: NBSP', `X-Api-Key:${NBSP}abcd1234efgh5678`, 'abcd1234efgh5678'],
    ['api_key NBSP = NBSP', `api_key${NBSP}=${NBSP}abcd1234efgh5678`, 'abcd1234efgh5678'],
    ['password NBSP : ideographic space', `password${NBSP}:\u3000hunter2secret`, 'hunter2secret'],
    ['a YAML list item after a NBSP', `password:\n-${NBSP}hunter2secret`, 'hunter2secret'],
  ])('%s', (_what, text, secret) => {
    for (const r of recorded(text)) expect(r).not.toContain(secret);
  });

  it('prose with a no-break space before a colon that is no secret name stays whole', () => {
    const text = `status${NBSP}: expired; total${NBSP}=${NBSP}12`;
    expect(redactOutput({ note: text })).toEqual({ note: text });
  });
});

describe('unicode forms: cards, SSNs, phones and IBANs with Unicode dashes, no-break spaces or non-ASCII digits', () => {
  it.each([
    ['card, en dashes', 'card 4111\u20131111\u20131111\u20131111'],
    ['card, em dashes', 'card 4111\u20141111\u20141111\u20141111'],
    ['card, minus signs', 'card 4111\u22121111\u22121111\u22121111'],
    ['card, full-width hyphens', 'card 4111\uff0d1111\uff0d1111\uff0d1111'],
    ['card, Arabic-Indic digits', 'card \u0664\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661'],
    ['card, Devanagari digits and NBSP', 'card \u096a\u0967\u0967\u0967\u00a0\u0967\u0967\u0967\u0967\u00a0\u0967\u0967\u0967\u0967\u00a0\u0967\u0967\u0967\u0967'],
    ['SSN, en dashes', 'ssn 123\u201345\u20136789'],
  ])('%s: gone from input and output', (_what, text) => {
    expect(redactInput({ note: text })).toEqual({ note: `${text.slice(0, text.indexOf(' ') + 1)}${REDACTED}` });
    expect(redactOutput({ note: text })).toEqual({ note: `${text.slice(0, text.indexOf(' ') + 1)}${REDACTED}` });
  });

  it.each([
    ['SSN, no-break spaces', 'ssn 123\u00a045\u00a06789'],
    ['SSN, full-width digits', 'ssn \uff11\uff12\uff13-\uff14\uff15-\uff16\uff17\uff18\uff19'],
    ['phone, en dashes', 'call +1 415\u2013555\u20132671 now'],
    ['NANP phone, en dash', 'call (415) 555\u20132671 now'],
    ['phone, full-width digits', 'call \uff0b\uff11 \uff14\uff11\uff15 \uff15\uff15\uff15 \uff12\uff16\uff17\uff11'],
    ['IBAN, no-break spaces', 'pay DE89\u00a03704\u00a00044\u00a00532\u00a00130\u00a000 please'],
  ])('%s: gone from output', (_what, text) => {
    const out = (redactOutput({ note: text }) as { note: string }).note;
    expect(out).toContain(REDACTED);
    expect(out).not.toMatch(/[\d\uff10-\uff19]{4}/);
  });

  it('what is not redacted stays as written: the text around a match keeps its non-ASCII characters', () => {
    const text = `r\u00e9f\u00a0A\u2013B, carte 4111\u20131111\u20131111\u20131111\u00a0\u2014 d\u00e9j\u00e0 pay\u00e9 \u0661\u0662`;
    expect(redactOutput({ note: text })).toEqual({ note: `r\u00e9f\u00a0A\u2013B, carte ${REDACTED}\u00a0\u2014 d\u00e9j\u00e0 pay\u00e9 \u0661\u0662` });
  });

  it('an IBAN with no-break spaces before more groups keeps the groups after it as written', () => {
    expect(redactOutput({ note: 'DE89\u00a03704\u00a00044\u00a00532\u00a00130\u00a000 ref\u00a01234' })).toEqual({ note: `${REDACTED} ref\u00a01234` });
  });

  it('non-ASCII digits that make no card, SSN or phone stay (a date, an amount, an order id)', () => {
    const text = 'order \u0661\u0662\u0663\u0664\u0665 on \uff12\uff10\uff12\uff16\u2013\uff11\uff12\u2013\uff10\uff15, total \u0967\u0968\u096b';
    expect(redactOutput({ note: text })).toEqual({ note: text });
  });
});

describe('unicode forms: foldForms and FoldedText', () => {
  it('folds digits of any script, dashes and blanks to ASCII, one UTF-16 unit for one', () => {
    const text = '\u0664\u06f1\u096a\uff14\u2013\u2014\u2212\uff0d\u00a0\u2009\u3000\uff0b\uff08\uff09';
    expect(foldForms(text)).toBe('4144----   +()');
  });

  it('leaves astral digits and dashes (two UTF-16 units) as written, so offsets still line up', () => {
    const text = 'x\u{1D7CF}\u{1D7D0}\u{10EAD}y';
    expect(foldForms(text)).toBe(text);
    expect(foldForms(text).length).toBe(text.length);
  });

  it('leaves ASCII text untouched (the same string)', () => {
    const text = 'card 4111-1111-1111-1111';
    expect(foldForms(text)).toBe(text);
  });

  it('FoldedText.replace cuts the span found in the folded copy out of the text as written', () => {
    const text = 'a\u00a0\u0661\u0662\u2013\u0663 b';
    expect(new FoldedText(text, foldForms(text)).replace(/\d+-\d/g, REDACTED).text).toBe(`a\u00a0${REDACTED} b`);
  });
});

describe('unicode forms: secret and personal key names spelled with Cyrillic or Greek look-alikes', () => {
  it.each([['p\u0430ssword'], ['\u0430piKey'], ['t\u043eken'], ['\u0441\u0430rd_number'], ['\u0391PI_KEY'], ['\u03f2vv'], ['\u0421lient_S\u0435cret'], ['p\u03acssword']])(
    '%j: its value is redacted like its ASCII twin',
    (key) => {
      expect(redactInput({ [key]: 'hunter2plainvalue' })).toEqual({ [key]: REDACTED });
      expect(redactOutput({ [key]: 'hunter2plainvalue' })).toEqual({ [key]: REDACTED });
    },
  );

  it('normalizeKey reads the look-alikes as Latin letters and keeps camelCase words apart', () => {
    expect(normalizeKey('\u0430piKey')).toBe('apikey');
    expect(normalizeKey('\u0391PI_KEY')).toBe('apikey');
  });

  it('a key in Cyrillic or Greek that names no secret keeps its value', () => {
    expect(redactOutput({ '\u043a\u043e\u043c\u043c\u0435\u043d\u0442\u0430\u0440\u0438\u0439': 'hello', '\u03c0\u03cc\u03bb\u03b7': 'Athens' })).toEqual({
      '\u043a\u043e\u043c\u043c\u0435\u043d\u0442\u0430\u0440\u0438\u0439': 'hello',
      '\u03c0\u03cc\u03bb\u03b7': 'Athens',
    });
  });
});
