import { createCipheriv, randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, keyPrefix } from '../../src/auth/api-key-hash.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { MINTED_SECRETS_ENV, mintedSecretForms, readMintedSecrets } from './minted-secrets.js';
import { NeedleIndex } from './needle-index.js';
import { describeFinding, scanDatabase, scanRunLog, secretForms } from './run-leak-scan.js';

/** The secrets minted during a run (API keys, the emulator's tokens): recorded, read back, and found by the run-wide scan. */
const dir = mkdtempSync(join(tmpdir(), 'tg-minted-'));
// Also when none of the file's tests runs (-t, runIf): vitest then skips its afterAll.
process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const apiKey = generateApiKey();
const amazonToken = `Atza|emu-${randomBytes(24).toString('base64url')}`;
const jumioToken = `eyJhbGciOiJSUzI1NiJ9.${randomBytes(24).toString('base64url')}.${randomBytes(16).toString('base64url')}`;

function mintedFile(): string {
  const path = join(dir, `minted-${randomBytes(4).toString('hex')}.tsv`);
  writeFileSync(path, `API key (agent, createKey)\t${apiKey}\nAmazon access token (emulator)\t${amazonToken}\nJumio access token (emulator)\t${jumioToken}\n`);
  return path;
}

describe('recording', () => {
  const saved = process.env[MINTED_SECRETS_ENV];
  afterEach(() => {
    if (saved === undefined) delete process.env[MINTED_SECRETS_ENV];
    else process.env[MINTED_SECRETS_ENV] = saved;
  });

  it('the emulator appends what it mints when TEST_MINTED_SECRETS names a file, and does nothing when it is unset', () => {
    const path = join(dir, 'recorded.tsv');
    process.env[MINTED_SECRETS_ENV] = path;
    const token = new ShopifyEmulator().installApp();
    expect(readFileSync(path, 'utf8')).toBe(`Shopify refresh token (emulator, installApp)\t${token}\n`);
    delete process.env[MINTED_SECRETS_ENV];
    new ShopifyEmulator().installApp();
    recordMintedSecret('unrecorded', 'shpat_00000000000000000000000000000000');
    expect(readFileSync(path, 'utf8').split('\n')).toHaveLength(2);
  });
});

describe('reading', () => {
  it('names each value by its label and line, each value once, never by the value', () => {
    const path = mintedFile();
    appendFileSync(path, `API key (agent, createKey)\t${apiKey}\n\nunlabelled-value-0123456789\n`);
    expect(readMintedSecrets(path)).toEqual({
      'API key (agent, createKey) #1': apiKey,
      'Amazon access token (emulator) #2': amazonToken,
      'Jumio access token (emulator) #3': jumioToken,
      'minted secret #6': 'unlabelled-value-0123456789',
    });
    expect(readMintedSecrets(join(dir, 'none.tsv'))).toEqual({});
  });

  it('searches a minted value by 24 characters past its format prefix, so a JWT header or tgw_ alone matches nothing', () => {
    const { secrets, needles } = mintedSecretForms(mintedFile());
    expect(secrets).toBe(3);
    const plain = (name: string) => needles.find((n) => n.name === name && n.forms[0]!.form === 'plain')!;
    expect(plain('Jumio access token (emulator) #3').text).toBe(jumioToken.slice(0, 'eyJhbGciOiJSUzI1NiJ9.'.length + 24));
    expect(plain('API key (agent, createKey) #1').text).toBe(apiKey.slice(0, 4 + 24));
    expect(needles.filter((n) => n.name === 'Amazon access token (emulator) #2').flatMap((n) => n.forms.map((f) => f.form))).toContain('url-encoded');
    // The listed prefix of a key (api_keys.key_prefix) holds none of them, in any form.
    const index = new NeedleIndex(needles);
    expect(index.find(`{"key_prefix":"${keyPrefix(apiKey)}","jwt":"eyJhbGciOiJSUzI1NiJ9.e30.x","token":"Atza|emu-"}`)).toEqual([]);
    // The fixed secrets' windows are unchanged (no format prefix counted).
    expect(secretForms({ X: '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' })[0]!.text).toBe('shpat_e3a17c0de5e8411b9a'); // 24
  });
});

describe('NeedleIndex', () => {
  it('finds exactly the needles a text holds, at any position, however many there are', () => {
    const needles = Array.from({ length: 5000 }, (_, i) => ({ text: `${randomBytes(12).toString('base64url')}-${i}` }));
    const index = new NeedleIndex(needles);
    const text = `${needles[0]!.text}…${'x'.repeat(1000)} ${needles[4321]!.text.slice(0, -1)} ${needles[4999]!.text}`;
    expect(index.find(text)).toEqual([needles[0], needles[4999]]);
    expect(index.find(needles[17]!.text)).toEqual([needles[17]]);
    expect(index.find('short')).toEqual([]);
  });
});

describe('the scan', () => {
  it('finds a minted value in the run log in the form it was written, naming it by its label', async () => {
    const { needles } = mintedSecretForms(mintedFile());
    const log = join(dir, 'run.log');
    writeFileSync(log, `a.spec.ts | in-process log\tbody=${encodeURIComponent(amazonToken)}\nb.spec.ts | child\tkey ${keyPrefix(apiKey)}… ${jumioToken.slice(0, 50)}\n`);
    const { lines, findings } = await scanRunLog(log, needles);
    expect(lines).toBe(2);
    expect(findings.map((f) => describeFinding(f, 'line(s)'))).toEqual([
      'Amazon access token (emulator) #2 (url-encoded) in the run log (first at line 1; from a.spec.ts | in-process log): 1 line(s)',
      'Jumio access token (emulator) #3 (plain, cut short: its first 45 characters) in the run log (first at line 2; from b.spec.ts | child): 1 line(s)',
    ]);
  });

  it("finds a long secret's end under a mask over its start, and the secret upper- or lower-cased; a whole one is reported once", async () => {
    const secret = 'amzn1.oa2-cs.v1.7f3e9a2c5b1d4e6f8091a2b3c4d5e6f7081928374655647382910a1b2c3d0001';
    const mixed = 'JumioEmuSecret7qR2vX9mB4nL8pW3tY';
    const needles = secretForms({ AMAZON_CLIENT_SECRET: secret, JUMIO_CLIENT_SECRET: mixed });
    const log = join(dir, 'forms.log');
    writeFileSync(
      log,
      [
        `a.spec.ts | masked\tsecret ****${secret.slice(-60)}`,
        `b.spec.ts | shouted\tSECRET=${secret.toUpperCase()}`,
        `c.spec.ts | folded\tsecret=${mixed.slice(0, 28).toLowerCase()}`,
        `d.spec.ts | whole\t{"secret":"${secret}"}`,
        `e.spec.ts | clean\tnothing here`,
      ].join('\n') + '\n',
    );
    const { findings } = await scanRunLog(log, needles);
    expect(findings.map((f) => describeFinding(f, 'line(s)'))).toEqual([
      'AMAZON_CLIENT_SECRET (plain, its last 24 characters) in the run log (first at line 1; from a.spec.ts | masked): 1 line(s)',
      'AMAZON_CLIENT_SECRET (plain, upper-cased) in the run log (first at line 2; from b.spec.ts | shouted): 1 line(s)',
      'JUMIO_CLIENT_SECRET (plain, lower-cased, cut short: its first 24 characters) in the run log (first at line 3; from c.spec.ts | folded): 1 line(s)',
      'AMAZON_CLIENT_SECRET (plain) in the run log (first at line 4; from d.spec.ts | whole): 1 line(s)',
    ]);
  });

  it("does not search for the end of a stand-in a spec typed (shpat_0123456789abcdef…): other test data holds it too", () => {
    const typed = secretForms({ TYPED: 'shpat_0123456789abcdef0123456789abcdef', REPEATED: 'sk-live-secret-value-xxxxxxxxxxxxxxxxxxxxxxxx' });
    expect(typed.filter((n) => n.secondary && n.forms[0]!.form.includes('its last'))).toEqual([]);
    const drawn = secretForms({ DRAWN: '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' });
    expect(drawn.some((n) => n.secondary && n.forms[0]!.form === 'plain, its last 24 characters')).toBe(true);
  });

  describe('in a database of its own', () => {
    const server = process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!;
    const name = `tg_scan_unit_${process.pid}`;
    const url = new URL(server);
    url.pathname = `/${name}`;
    const admin = (sql: string) => {
      const c = new pg.Client({ connectionString: server });
      return c.connect().then(() => c.query(sql)).finally(() => c.end());
    };
    beforeAll(() => admin(`CREATE DATABASE ${name}`));
    afterAll(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

    it('finds minted and fixed secrets by table and column, bytea as hex, plaintext in an encrypted column too, and no secret in its ciphertext', async () => {
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      await c.query(`CREATE TABLE api_keys (id int, key_prefix text, note jsonb, blob bytea);
                     CREATE TABLE integration_credentials (id int, ciphertext bytea)`);
      for (let i = 0; i < 3; i++) await c.query(`INSERT INTO api_keys VALUES ($1, $2, $3, $4)`, [i, keyPrefix(apiKey), { i }, null]);
      await c.query(`INSERT INTO api_keys VALUES (10, 'x', $1, $2), (11, 'y', $1, NULL)`, [{ said: `Bearer ${apiKey}` }, Buffer.from(`t=${jumioToken}`)]);
      // The column meant for AES-GCM ciphertext: the secrets encrypted (found nowhere), and one written as plaintext.
      const aesGcm = (plaintext: string): Buffer => {
        const cipher = createCipheriv('aes-256-gcm', randomBytes(32), randomBytes(12));
        return Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      };
      for (const [i, secret] of [apiKey, amazonToken, jumioToken].entries()) await c.query(`INSERT INTO integration_credentials VALUES ($1, $2)`, [i, aesGcm(secret)]);
      await c.query(`INSERT INTO integration_credentials VALUES (9, $1)`, [Buffer.from(amazonToken)]);
      await c.end();
      const needles = [...secretForms({ SHOPIFY_TOKEN: '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' }), ...mintedSecretForms(mintedFile()).needles];
      const { tables, rows, findings } = await scanDatabase(url.toString(), needles);
      expect({ tables, rows }).toEqual({ tables: 2, rows: 9 });
      expect(findings.map((f) => describeFinding(f, 'row(s)')).sort()).toEqual([
        'API key (agent, createKey) #1 (plain) in table api_keys, column note: 2 row(s)',
        'Amazon access token (emulator) #2 (plain, as bytes (hex)) in table integration_credentials, column ciphertext: 1 row(s)',
        'Jumio access token (emulator) #3 (plain, as bytes (hex)) in table api_keys, column blob: 1 row(s)',
      ]);
    });
  });
});
