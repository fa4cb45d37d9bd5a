import { describe, expect, it } from 'vitest';
import { redactInput, redactOutput } from './redaction.service.js';

/**
 * Secrets and card or phone numbers that came through redaction, found by property-based tests (fast-check: known
 * credentials in generated text, wrappings and containers). Each case leaked before its fix.
 */
const SECRET = 'Zq7Xw2Lp9Rt4Mv8Kc3Nb';
const shown = (v: unknown): string => JSON.stringify(v);
const both = [
  ['input', redactInput],
  ['output', redactOutput],
] as const;

describe('a harmless name=value no longer hides a secret parameter inside its value from the scan', () => {
  const cases = [
    `callback=https://hooks.example.com/x?token=${SECRET}`,
    `see https://app.example.com/login?next=https://api.example.com/v1?access_token=${SECRET}`,
    `url=/v1/items?api_key=${SECRET}`,
    `a=1,password=${SECRET}`,
    `host=db user= password=${SECRET} dbname=app`,
  ];
  for (const [mode, redact] of both) {
    for (const text of cases) it(`${mode}: ${text}`, () => expect(shown(redact({ note: text }))).not.toContain(SECRET));
  }

  it('what is no secret stays as written, and the secret alone goes', () => {
    expect(redactInput({ note: 'a=1,b=2&c=x?d=y' })).toEqual({ note: 'a=1,b=2&c=x?d=y' });
    expect(redactInput({ note: `url=/v1/items?api_key=${SECRET}&page=2` })).toEqual({ note: 'url=/v1/items?api_key=[REDACTED]&page=2' });
    expect(redactInput({ note: `host=db user=app password="${SECRET}" dbname=app` })).toEqual({ note: 'host=db user=app password="[REDACTED]" dbname=app' });
    expect(redactInput({ note: 'token==null' })).toEqual({ note: 'token==null' });
  });
});

describe('a card or phone number right after an escaped line break or tab (JSON held as text)', () => {
  const cards = ['{"note":"Card:\\n4111 1111 1111 1111"}', 'line1\\n4242424242424242', 'a\\t4111-1111-1111-1111', '{"memo":"x\\r\\n4242 4242 4242 4242"}'];
  for (const [mode, redact] of both) {
    for (const text of cards) it(`${mode}: ${text}`, () => expect(shown(redact({ note: text }))).not.toMatch(/4111.?1111.?1111.?1111|4242.?4242.?4242.?4242/));
  }
  for (const text of ['{"note":"Call me:\\n+44 20 7946 0958"}', 'contact\\n+1 415 555 0142', 'x\\n415-555-2671']) {
    it(`output: ${text}`, () => expect(shown(redactOutput({ note: text }))).not.toMatch(/7946 0958|555 0142|555-2671/));
  }
  it('an order number after an escape stays', () => expect(redactOutput({ note: 'order\\n1001 shipped' })).toEqual({ note: 'order\\n1001 shipped' }));
});

describe("a pair's or header's name is folded as a property name is", () => {
  for (const name of ['ｐａｓｓｗｏｒｄ', 'pass\u200bword', 'p\u0430ssword', 'pass\u00adword', 'x-api-key\u200b']) {
    it(`${JSON.stringify(name)}: [{name, value}] and [[name, value]]`, () => {
      expect(shown(redactInput([{ name, value: SECRET }]))).not.toContain(SECRET);
      expect(shown(redactOutput({ headers: [[name, SECRET]] }))).not.toContain(SECRET);
    });
  }
  it('a harmless pair keeps its value', () => expect(redactInput([{ name: 'ｃｏｌｏｒ', value: 'blue' }])).toEqual([{ name: 'ｃｏｌｏｒ', value: 'blue' }]));
});

describe('an auth scheme takes the whole token', () => {
  for (const text of [`curl -H 'x: Bearer abcdefghij=${SECRET}'`, `Bearer s1.abcdefgh=${SECRET}`, `Basic eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.${SECRET}`]) {
    it(text, () => expect(shown(redactInput({ note: text }))).not.toContain(SECRET));
  }
  it('a WWW-Authenticate challenge is no token, and Basic credentials at the end of a sentence still go', () => {
    expect(redactInput({ note: 'WWW-Authenticate: Bearer realm="api", error="invalid_token"' })).toEqual({ note: 'WWW-Authenticate: Bearer realm="api", error="invalid_token"' });
    expect(redactInput({ note: 'send Basic dXNlcjpwYXNzd29yZA==.' })).toEqual({ note: 'send Basic [REDACTED].' });
  });
});

describe('an auth scheme after a percent or \\u escape, its token after a raw blank', () => {
  for (const [mode, redact] of both) {
    for (const text of [`Authorization:%20Bearer ${SECRET}`, `https://x/y?h=%20Bearer ${SECRET} done`, `token%3DBearer ${SECRET}`, `h=%22Bearer ${SECRET}%22`, `{\\u0022auth\\u0022:\\u0022Bearer ${SECRET}\\u0022}`]) {
      it(`${mode}: ${text}`, () => expect(shown(redact({ note: text }))).not.toContain(SECRET));
    }
  }
});

describe('a secret name in text spelt with full-width or mathematical letters, or look-alikes among Latin ones, reads as its ASCII', () => {
  const cases = [
    `ｐａｓｓｗｏｒｄ=${SECRET}`,
    `ｐａｓｓｗｏｒｄ: ${SECRET}`,
    `ａｐｉ＿ｋｅｙ＝${SECRET}`,
    `ｓｅｃｒｅｔ：${SECRET}`,
    `{"ｐａｓｓｗｏｒｄ": "${SECRET}"}`,
    `Ｂｅａｒｅｒ ${SECRET}`,
    `𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝=${SECRET}`,
    `p\u0430ssword=${SECRET}`,
    `api_kеy: ${SECRET}`,
  ];
  for (const [mode, redact] of both) {
    for (const text of cases) it(`${mode}: ${text}`, () => expect(shown(redact({ note: text }))).not.toContain(SECRET));
  }
  it('text whose reading holds no secret stays as written, its non-ASCII letters and all', () => {
    for (const note of ['Café crème 250 g', 'Zoë ordered 2 × “Größe M”', 'ｃｏｌｏｒ=blue', '東京都 渋谷区 ＡＢＣビル']) expect(redactInput({ note })).toEqual({ note });
    expect(redactOutput({ note: 'Tél: +33 1 23 45 67 89' })).toEqual({ note: 'Tél: [REDACTED]' });
  });

  // Read as written, as before: words wholly in another script or with accents spell no ASCII (the first reading
  // folded look-alikes and dropped accents everywhere, and lost these whole), nor do ＠ and ． in a unit price.
  const harmless = [
    'ΤΙΜΗ ΠΡΙΝ: 49,90 €',
    'ΠΑΡΑΔΟΣΗ ΠΡΙΝ: 24/12',
    'Эфир ОТР: 19:00, Новости',
    'Uy tín: 5 năm, Giao hàng: nhanh',
    'Điểm uy tín: 98',
    'Secrétariat : ouvert du lundi au vendredi',
    'Secretaría: lunes a viernes de 9 a 14',
    'ドル円＠１５０．２５で買い',
    'ガソリン ４０Ｌ＠１６８．５円',
    '商品规格\n针脚 PIN: 40，电压：5V\n颜色：白色',
  ];
  for (const [mode, redact] of both) {
    for (const note of harmless) {
      it(`${mode}: ${JSON.stringify(note)} is not [REDACTED] whole`, () => expect(redact({ note })).not.toEqual({ note: '[REDACTED]' }));
    }
  }
  it('input: those come out as written (the Chinese spec loses its PIN value only, as in ASCII)', () => {
    for (const note of harmless.slice(0, -1)) expect(redactInput({ note })).toEqual({ note });
    expect(redactInput({ note: harmless.at(-1) })).toEqual({ note: '商品规格\n针脚 PIN: [REDACTED]\n颜色：白色' });
  });
});

describe("a quoted key ending in its own ':' or '=' (JSON held as text)", () => {
  const cases = [
    `{"password:": "${SECRET}"}`,
    `{"password:":"${SECRET}"}`,
    `{\\"password:\\": \\"${SECRET}\\"}`,
    `{"api_key=": "${SECRET}", "a": 1}`,
    `{\\"api_key=\\":\\"${SECRET}\\"}`,
    `{"password:" => "${SECRET}"}`,
  ];
  for (const [mode, redact] of both) {
    for (const text of cases) it(`${mode}: ${text}`, () => expect(shown(redact({ note: text }))).not.toContain(SECRET));
  }
  it('the key stays as written and the value alone goes', () => {
    expect(redactInput({ note: `{"password:": "${SECRET}", "user": "bob"}` })).toEqual({ note: '{"password:": "[REDACTED]", "user": "bob"}' });
    expect(redactInput({ note: `{"api_key=": "${SECRET}"}` })).toEqual({ note: '{"api_key=": "[REDACTED]"}' });
    expect(redactInput({ note: '{"status:": "ok"}' })).toEqual({ note: '{"status:": "ok"}' });
  });
});
