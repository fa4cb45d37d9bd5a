import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './app-config.js';
import { CONFIG_SCHEMA, ConfigError, parseRawConfigCollecting, SENSITIVE_VARS } from './config.schema.js';

const KEY = Buffer.alloc(32, 1).toString('base64');

describe('config schema', () => {
  it('documents every variable in .env.example', () => {
    const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
    const documented = new Set([...example.matchAll(/^([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    expect([...documented].sort()).toEqual(Object.keys(CONFIG_SCHEMA).sort());
  });

  it('lists every problem at once and never echoes a secret', () => {
    const secret = 'postgres-but-wrong-secret-value';
    let err: unknown;
    try {
      loadConfig({ NODE_ENV: 'production', PORT: 'abc', RATE_LIMIT_RPS: '-1', DATABASE_URL: secret, BOOTSTRAP_ADMIN_KEY: 'short' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    for (const name of ['PORT', 'RATE_LIMIT_RPS', 'DATABASE_URL', 'BOOTSTRAP_ADMIN_KEY']) expect(problems).toContain(name);
    expect(problems).not.toContain(secret);
  });

  it('reads values without the spaces around them (a .env line "X= v ", a pasted newline), and checks the Shopify API version', () => {
    const { raw: config, problems } = parseRawConfigCollecting({ SHOPIFY_BASE_URL: ' http://127.0.0.1:9/shop/ ', SHOPIFY_API_VERSION: ' 2026-04\n', LOG_LEVEL: 'warn ', HOST: ' 127.0.0.1 ' });
    expect(problems).toEqual([]);
    expect(config).toMatchObject({ SHOPIFY_BASE_URL: 'http://127.0.0.1:9/shop', SHOPIFY_API_VERSION: '2026-04', LOG_LEVEL: 'warn', HOST: '127.0.0.1' });
    expect(parseRawConfigCollecting({ SHOPIFY_API_VERSION: '   ' }).raw).toMatchObject({ SHOPIFY_API_VERSION: '2026-07' });
    expect(parseRawConfigCollecting({ SHOPIFY_API_VERSION: 'unstable' }).problems).toEqual([]);
    for (const bad of ['2026-13', '2026-02', 'latest', '2026-07/../x']) {
      expect(parseRawConfigCollecting({ SHOPIFY_API_VERSION: bad }).problems, bad).toEqual([expect.stringMatching(/^SHOPIFY_API_VERSION must be a Shopify API version/)]);
    }
  });

  it('reads DATABASE_URL and the integers without the spaces around them too; only spaces is no value (the default)', () => {
    // A trailing space or newline (a secret mounted from a file) kept in the URL became part of the database name:
    // the check passed and start-up failed later with `database "postgres\n" does not exist`.
    const url = 'postgres://postgres@127.0.0.1:5432/postgres';
    for (const raw of [`${url} `, `${url}\n`, ` ${url}`]) {
      const { raw: config, problems } = parseRawConfigCollecting({ DATABASE_URL: raw, PORT: ' 8080\n' });
      expect(problems, JSON.stringify(raw)).toEqual([]);
      expect(config).toMatchObject({ DATABASE_URL: url, PORT: 8080 });
    }
    const { raw: config, problems } = parseRawConfigCollecting({ DATABASE_URL: '  ', PORT: ' ', DB_POOL_SIZE: '\n', HOST: '  ' });
    expect(problems).toEqual([]);
    expect(config).toMatchObject({ DATABASE_URL: undefined, PORT: 3000, DB_POOL_SIZE: 20, HOST: '0.0.0.0' });
    expect(parseRawConfigCollecting({ PORT: ' 80 80 ' }).problems).toEqual(['PORT must be an integer, got " 80 80 "']);
  });

  it('durations that cannot work (seconds written for milliseconds, a sweep margin below the outcome write) are warned about at start-up, not refused', () => {
    const base = { NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY };
    expect(loadConfig(base).warnings).toEqual([]); // the defaults
    const warned = loadConfig({ ...base, VENDOR_TIMEOUT_MS: '60', CIRCUIT_BREAKER_COOLDOWN_MS: '30', SHUTDOWN_DELAY_MS: '15', STALE_RUNNING_MARGIN_MS: '0' });
    expect(warned.VENDOR_TIMEOUT_MS).toBe(60);
    expect(warned.warnings).toEqual([
      expect.stringMatching(/^VENDOR_TIMEOUT_MS=60 is 60 milliseconds .*did you mean 60000\?\)$/),
      expect.stringMatching(/^CIRCUIT_BREAKER_COOLDOWN_MS=30 is 30 milliseconds .*did you mean 30000\?\)$/),
      expect.stringMatching(/^SHUTDOWN_DELAY_MS=15 is 15 milliseconds .*did you mean 15000\?\)$/),
      expect.stringMatching(/^STALE_RUNNING_MARGIN_MS=0: .*below 10000 the orphan sweep can take a call still finishing/),
    ]);
    expect(loadConfig({ ...base, VENDOR_TIMEOUT_MS: '1000', CIRCUIT_BREAKER_COOLDOWN_MS: '1000', SHUTDOWN_DELAY_MS: '0', STALE_RUNNING_MARGIN_MS: '10000' }).warnings).toEqual([]);
  });

  it('DB_CONNECTION_MODE: startup by default, server when asked, anything else refused; server without DATABASE_URL is warned about', () => {
    expect(parseRawConfigCollecting({}).raw.DB_CONNECTION_MODE).toBe('direct');
    expect(parseRawConfigCollecting({ DB_CONNECTION_MODE: ' pooled\n' }).raw.DB_CONNECTION_MODE).toBe('pooled');
    expect(parseRawConfigCollecting({ DB_CONNECTION_MODE: 'none' }).problems).toEqual(['DB_CONNECTION_MODE must be one of direct, pooled, got "none"']);
    const base = { NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY, DB_CONNECTION_MODE: 'pooled' };
    expect(loadConfig(base).warnings).toEqual([expect.stringMatching(/^DB_CONNECTION_MODE=pooled is for a DATABASE_URL behind a connection pooler: the embedded database/)]);
    expect(loadConfig(base).DB_CONNECTION_MODE).toBe('direct'); // as the embedded database is reached
    expect(loadConfig({ ...base, DATABASE_URL: 'postgres://gw@proxy.internal:5432/tg' }).warnings).toEqual([]);
    // The user's own startup options are still sent: a pooler refusing `options` would refuse every connection.
    expect(loadConfig({ ...base, DATABASE_URL: 'postgres://gw@proxy.internal:5432/tg', PGOPTIONS: '-c jit=off' }).warnings).toEqual([
      expect.stringMatching(/^DB_CONNECTION_MODE=pooled, but PGOPTIONS is set: it is still sent, as the startup parameter `options`/),
    ]);
    expect(loadConfig({ ...base, DATABASE_URL: 'postgres://gw@proxy.internal:5432/tg?options=-c%20jit%3Doff' }).warnings).toEqual([
      expect.stringMatching(/^DB_CONNECTION_MODE=pooled, but DATABASE_URL's options parameter is set/),
    ]);
    expect(loadConfig({ ...base, DB_CONNECTION_MODE: 'direct', DATABASE_URL: 'postgres://gw@db.internal:5432/tg', PGOPTIONS: '-c jit=off' }).warnings).toEqual([]);
  });

  it('a vendor base URL is one fixed URL: a {placeholder} (never filled in), a query, a fragment or a user part is refused', () => {
    for (const [name, value, problem] of [
      ['JUMIO_AUTH_BASE_URL', 'https://auth.{region}.jumio.ai', /a \{placeholder\} is not filled in/],
      ['AMAZON_SPAPI_BASE_URL', 'https://sellingpartnerapi-{region}.amazon.com', /a \{placeholder\} is not filled in/],
      ['SHOPIFY_BASE_URL', 'https://{shopDomain}', /a \{placeholder\} is not filled in/],
      ['SHOPIFY_BASE_URL', 'https://shop.example/#x', /no query or fragment/],
      ['NANGO_HOST', 'https://nango.example/?a=1', /no query or fragment/],
      ['JUMIO_RETRIEVAL_BASE_URL', 'https://user:pw@retrieval.example', /user name or password/],
    ] as const) {
      const { problems } = parseRawConfigCollecting({ [name]: value });
      expect(problems, value).toEqual([expect.stringMatching(problem)]);
      expect(problems[0]).toMatch(new RegExp(`^${name} `));
    }
    expect(parseRawConfigCollecting({ SHOPIFY_BASE_URL: 'http://127.0.0.1:9/shop/', JUMIO_AUTH_BASE_URL: 'https://auth.emea-1.jumio.ai' }).problems).toEqual([]);
  });

  it('a vendor base URL that does not parse is quoted without its user name and password', () => {
    for (const name of ['SHOPIFY_BASE_URL', 'NANGO_HOST', 'AMAZON_LWA_URL']) {
      const { problems } = parseRawConfigCollecting({ [name]: 'https://egress:Proxy-SECRET@proxy.internal:443443/x' });
      expect(problems).toEqual([`${name} must be an absolute URL, got "https://…@proxy.internal:443443/x"`]);
    }
    expect(parseRawConfigCollecting({ NANGO_HOST: 'nango.example' }).problems).toEqual(['NANGO_HOST must be an absolute URL, got "nango.example"']);
  });

  it('reads BOOTSTRAP_ADMIN_KEY without the spaces or newline around it (a key mounted from a file); only spaces is unset', () => {
    const key = 'tgk_bootstrap_' + 'a'.repeat(32);
    for (const raw of [`${key}\n`, `  ${key} `, `${key}\r\n`]) {
      const { raw: config, problems } = parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: raw });
      expect(problems, JSON.stringify(raw)).toEqual([]);
      expect(config.BOOTSTRAP_ADMIN_KEY).toBe(key);
    }
    expect(parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: '   ' })).toMatchObject({ problems: [], raw: { BOOTSTRAP_ADMIN_KEY: undefined } });
    expect(parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: ` ${key.slice(0, 10)} ${key}` }).problems).toEqual([expect.stringMatching(/^BOOTSTRAP_ADMIN_KEY may contain only printable ASCII/)]);
  });

  it('refuses a DATABASE_URL the driver could not read (an unencoded # or % in the password), naming the variable, not the value', () => {
    for (const url of ['postgres://gateway:pa#ss-SECRET@db:5432/tool_gateway', 'postgres://gateway:50%-SECRET@db:5432/tool_gateway', 'postgres://u:p@db/x#SECRET']) {
      const { problems } = parseRawConfigCollecting({ DATABASE_URL: url });
      expect(problems, url).toEqual([expect.stringMatching(/^DATABASE_URL must be a valid URL: percent-encode/)]);
      expect(problems.join('\n')).not.toContain('SECRET');
    }
    // Encoded, and the other forms the driver takes (the Unix-socket ones without a host too), are fine.
    for (const url of [
      'postgres://gateway:pa%23ss@db:5432/tool_gateway',
      'postgresql://db/tool_gateway',
      'postgres:///tool_gateway?host=/var/run/postgresql',
      'postgres://gateway:pw@/tool_gateway?host=/var/run/postgresql',
      'postgres://gateway@/tool_gateway?host=/var/run/postgresql&port=5433',
      'postgres://gateway:pw@[::1]:5432/tool_gateway',
    ]) {
      expect(parseRawConfigCollecting({ DATABASE_URL: url }).problems, url).toEqual([]);
    }
  });

  it('a socket form the driver cannot read either (no path after the missing host) is refused', () => {
    for (const url of ['postgres://gateway@?host=/var/run/postgresql', 'postgres://gateway:pw@?host=/var/run/postgresql', 'postgres://gateway@']) {
      expect(parseRawConfigCollecting({ DATABASE_URL: url }).problems, url).toEqual([expect.stringMatching(/^DATABASE_URL must be a valid URL/)]);
    }
  });

  it('a DATABASE_URL port that is not one is said to be the port (not the password); never the value', () => {
    for (const url of ['postgres://gateway:pw-SECRET@db.internal:543200/tool_gateway', 'postgres://gateway:pw-SECRET@db.internal:54x/tool_gateway', 'postgres://gateway:pw-SECRET@[::1]:70000/db']) {
      const { problems } = parseRawConfigCollecting({ DATABASE_URL: url });
      expect(problems, url).toEqual(['DATABASE_URL must name a port from 1 to 65535 after the host']);
    }
    // A "/" left unencoded in the password makes what follows look like a port: that is the password's problem.
    const { problems } = parseRawConfigCollecting({ DATABASE_URL: 'postgres://gateway:pw/SECRET@db.internal:99999/tool_gateway' });
    expect(problems).toEqual([expect.stringMatching(/^DATABASE_URL must be a valid URL: percent-encode/)]);
  });

  it('a DATABASE_URL naming an SSL file that does not exist is refused, naming the parameter (the driver would throw a bare ENOENT)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-ssl-'));
    try {
      const ca = join(dir, 'ca.pem');
      for (const param of ['sslrootcert', 'sslcert', 'sslkey']) {
        const { problems } = parseRawConfigCollecting({ DATABASE_URL: `postgres://gateway:pw-SECRET@db/tool_gateway?sslmode=verify-full&${param}=${ca}` });
        expect(problems).toEqual([`DATABASE_URL names ${param}=${ca}, which does not exist`]);
      }
      writeFileSync(ca, 'not checked here: the driver reads it');
      expect(parseRawConfigCollecting({ DATABASE_URL: `postgres://gateway:pw@db/tool_gateway?sslmode=verify-full&sslrootcert=${ca}` }).problems).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('development key: a start refused for another variable creates no key file, yet names a DATA_DIR it could not be made in', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-refused-'));
    try {
      const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
        try {
          loadConfig(env);
          return [];
        } catch (err) {
          return (err as ConfigError).problems;
        }
      };
      const dataDir = join(dir, 'fresh');
      expect(problemsOf({ NODE_ENV: 'development', PORT: 'abc', DATA_DIR: dataDir })).toEqual([expect.stringMatching(/^PORT must be an integer/)]);
      expect(readdirSync(dir)).toEqual([]);
      // DATA_DIR under a regular file: listed with the other problems, not thrown as a bare ENOTDIR.
      const file = join(dir, 'a-file');
      writeFileSync(file, 'x');
      const underFile = join(file, 'data');
      for (const env of [{ PORT: 'abc' }, {}]) {
        const problems = problemsOf({ NODE_ENV: 'development', DATA_DIR: underFile, ...env });
        expect(problems, JSON.stringify(env)).toContainEqual(expect.stringMatching(new RegExp(`^DATA_DIR: the development key file ${join(underFile, 'master.key')} cannot be created.*ENOTDIR`)));
        expect(problems.length).toBe(Object.keys(env).length + 1);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('requires the master key in production', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/MASTER_ENCRYPTION_KEY is required/);
    expect(loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY }).keyring.activeKeyId).toBe('k1');
  });

  it('rejects a key that is not exactly 32 bytes, naming where it came from (the variable, the entry, the key file) and never the key', () => {
    const short = Buffer.alloc(31, 1).toString('base64');
    expect(() => loadConfig({ MASTER_ENCRYPTION_KEY: short })).toThrow(/MASTER_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes/);
    expect(() => loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${short},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' })).toThrow(
      /MASTER_ENCRYPTION_KEYS entry "k2" must be the base64 encoding of exactly 32 bytes/,
    );
    const dir = mkdtempSync(join(tmpdir(), 'cfg-key-'));
    try {
      writeFileSync(join(dir, 'master.key'), 'not-a-key-SECRET\n', { mode: 0o600 }); // its own (untrustedDataDir)
      let message = '';
      try {
        loadConfig({ NODE_ENV: 'development', DATA_DIR: dir });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain(`the development key file ${join(dir, 'master.key')} (MASTER_ENCRYPTION_KEY is not set) must be the base64 encoding`);
      expect(message).not.toContain('SECRET');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('never quotes a MASTER_ENCRYPTION_ACTIVE_KEY_ID that is not a key id: a whole entry pasted in is a key', () => {
    const k2 = Buffer.alloc(32, 7).toString('base64');
    let message = '';
    try {
      loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${k2},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: `k2:${k2}` });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('MASTER_ENCRYPTION_ACTIVE_KEY_ID must be a key id listed in MASTER_ENCRYPTION_KEYS (like k2), not an entry or a key');
    expect(message).not.toContain(k2);
    // A key id that is not listed is named: it is no secret, and the operator needs to see the typo.
    expect(() => loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${k2},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k3' })).toThrow(
      'MASTER_ENCRYPTION_ACTIVE_KEY_ID "k3" is not in MASTER_ENCRYPTION_KEYS',
    );
  });

  it('says so when one key is given under two ids (the old key pasted for the new one), naming the ids, never the key', () => {
    // A warning, not a refusal: a deployment already running so has rows under both ids and needs both loaded.
    const cfg = loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${KEY},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' });
    expect(cfg.warnings).toContain('MASTER_ENCRYPTION_KEYS gives key ids "k2" and "k1" the same key: each id should name its own key (rotate to a new key under a new id)');
    expect(cfg.warnings.join('\n')).not.toContain(KEY);
    expect([...cfg.keyring.keys.keys()]).toEqual(['k2', 'k1']);
    // The same key spelt in another base64 form (no padding) is the same key.
    const unpadded = loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${KEY.replace(/=+$/, '')},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' });
    expect(unpadded.warnings.some((w) => w.includes('the same key'))).toBe(true);
    const distinct = loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${Buffer.alloc(32, 9).toString('base64')},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' });
    expect(distinct.warnings.some((w) => w.includes('the same key'))).toBe(false);
  });

  it('loads several keys with one active', () => {
    const k2 = Buffer.alloc(32, 2).toString('base64');
    const cfg = loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${k2},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' });
    expect(cfg.keyring.activeKeyId).toBe('k2');
    expect([...cfg.keyring.keys.keys()].sort()).toEqual(['k1', 'k2']);
    expect(() => loadConfig({ MASTER_ENCRYPTION_KEYS: `k2:${k2}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k9' })).toThrow(/k9/);
    // A list with no key in it would start a service that can neither encrypt nor decrypt.
    // Only spaces is no value at all, as for every variable: then the production key is missing.
    expect(() => loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEYS: ' ' })).toThrow(/MASTER_ENCRYPTION_KEY is required/);
    for (const blank of [',', ' , ,']) {
      expect(() => loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEYS: blank }), JSON.stringify(blank)).toThrow(/MASTER_ENCRYPTION_KEYS lists no key/);
    }
  });

  it('with several keys, requires the active one to be named (never the first listed by default); one key is active alone', () => {
    const k2 = Buffer.alloc(32, 2).toString('base64');
    for (const keys of [`k2:${k2},k1:${KEY}`, `k1:${KEY},k2:${k2}`]) {
      expect(() => loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEYS: keys }), keys).toThrow(/MASTER_ENCRYPTION_ACTIVE_KEY_ID is required when MASTER_ENCRYPTION_KEYS lists more than one key/);
    }
    expect(loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEYS: `k2:${k2}` }).keyring.activeKeyId).toBe('k2');
    expect(loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEYS: `k2:${k2},k1:${KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' }).keyring.activeKeyId).toBe('k1');
  });

  it('marks the secrets as sensitive', () => {
    expect(SENSITIVE_VARS).toEqual(expect.arrayContaining(['DATABASE_URL', 'MASTER_ENCRYPTION_KEY', 'MASTER_ENCRYPTION_KEYS', 'BOOTSTRAP_ADMIN_KEY']));
  });

  it('development key: a write cut short (a file-size limit, as a full disk) is refused naming DATA_DIR, and leaves no part of the key behind (built dist/)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tgw-master-key-full-'));
    try {
      const config = fileURLToPath(new URL('../../dist/src/config/app-config.js', import.meta.url));
      const script = `const { loadConfig } = await import(${JSON.stringify(config)});
        try { loadConfig({ NODE_ENV: 'development', DATA_DIR: ${JSON.stringify(dir)} }); } catch (err) { process.stdout.write(err.message); }`;
      // util-linux's prlimit: files of this process may not grow past 10 bytes (Node ignores SIGXFSZ: the write fails EFBIG).
      const { stdout } = await promisify(execFile)('prlimit', ['--fsize=10:10', process.execPath, '--input-type=module', '-e', script]);
      expect(stdout).toContain(`DATA_DIR: the development key file ${join(dir, 'master.key')} cannot be created or read (EFBIG)`);
      expect(readdirSync(dir)).toEqual([]); // before: master.key.<pid>.<random>.tmp, 10 bytes of the key
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('development key: gateways starting together on one DATA_DIR all use the one key written first (built dist/)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tgw-master-key-'));
    try {
      const config = fileURLToPath(new URL('../../dist/src/config/app-config.js', import.meta.url));
      // Every child loads the module, then waits for one common instant, so their starts collide.
      const at = Date.now() + 1_500;
      const script = `const { loadConfig } = await import(${JSON.stringify(config)});
        while (Date.now() < ${at});
        const c = loadConfig({ NODE_ENV: 'development', DATA_DIR: ${JSON.stringify(dir)} });
        process.stdout.write(c.keyring.keys.get('k1').toString('base64'));`;
      const run = promisify(execFile);
      const keys = await Promise.all(Array.from({ length: 8 }, () => run(process.execPath, ['--input-type=module', '-e', script]).then((r) => r.stdout)));
      const onDisk = readFileSync(join(dir, 'master.key'), 'utf8').trim();
      expect(Buffer.from(onDisk, 'base64')).toHaveLength(32);
      expect(new Set(keys)).toEqual(new Set([onDisk]));
      expect(readdirSync(dir)).toEqual(['master.key']); // no temporary file left behind
      // A later start reads the same key.
      expect(loadConfig({ NODE_ENV: 'development', DATA_DIR: dir }).keyring.keys.get('k1')?.toString('base64')).toBe(onDisk);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
