/**
 * Found by a review of the configuration surface: values that started a gateway that printed a secret, never worked,
 * or never started at all without a word.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/app-config.js';
import { parseRawConfigCollecting } from '../../src/config/config.schema.js';
import { runBuiltCli } from '../support/built-cli.js';
import { trackChild } from '../support/child-processes.js';
import { gatewayEnv, startGatewayProcess } from '../support/gateway-process.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';
import { adminAuth } from '../support/test-app.js';

const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KEY = Buffer.alloc(32, 1).toString('base64');

/** Starts dist/src/main.js with `env`; resolves with its exit code (null: killed after `ms`) and all it printed. */
async function runGateway(env: NodeJS.ProcessEnv, until: (out: string) => boolean, ms: number): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [MAIN], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && child.exitCode === null && !until(out)) await new Promise((r) => setTimeout(r, 100));
  if (child.exitCode === null) child.kill('SIGKILL');
  return { code: await exited, out };
}

describe('a password holding an unencoded "/" after digits (`user:2024/pw@host`: a host, a port and a path to WHATWG)', () => {
  const SECRET = 'Summer-secret-e7c1';
  const URL_ = `postgres://gateway:2024/${SECRET}@127.0.0.1:5432/tool_gateway`;

  it('DATABASE_URL: refused by the configuration (percent-encode), as "p/ss" and "#" are', () => {
    const { problems } = parseRawConfigCollecting({ DATABASE_URL: URL_ });
    expect(problems).toEqual([expect.stringMatching(/^DATABASE_URL must be a valid URL: percent-encode/)]);
  });

  it('DATABASE_URL: the gateway never prints the password part (the start-up probe printed it on every retry line)', async () => {
    const { out } = await runGateway(gatewayEnv({ DATABASE_URL: URL_, DATA_DIR: '.tmp/config-surface' }), (o) => /DATABASE_URL/.test(o), 15_000);
    expect(out).toMatch(/DATABASE_URL/);
    expect(out).not.toContain(SECRET);
  }, 30_000);

  it.each([
    ['NANGO_HOST', 'https://svc:Hunter#2secret@proxy.internal', 'Hunter#2secret'],
    ['SHOPIFY_BASE_URL', 'https://svc:pa/ss-secret@proxy.internal:8443', 'ss-secret'],
    ['AMAZON_LWA_URL', 'https://svc:pa?ss-secret@proxy.internal:443443/x', 'ss-secret'],
    ['JUMIO_AUTH_BASE_URL', 'https://svc:2024/ss-secret@proxy.internal', 'ss-secret'],
  ])('a vendor URL, %s = %s: refused, the password never in the message', (name, value, secretPart) => {
    const { problems } = parseRawConfigCollecting({ [name]: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${name} `));
    expect(problems[0]).not.toContain(secretPart);
  });
});

describe('start-up', () => {
  it("BOOTSTRAP_ADMIN_KEY with the quotes an env file kept ('<key>'): refused naming the quotes, not a gateway whose admin key answers 401", async () => {
    const quoted = parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: `'${TEST_ADMIN_KEY}'` }).problems;
    expect(quoted).toEqual([expect.stringMatching(/^BOOTSTRAP_ADMIN_KEY is quoted/)]);
    expect(parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: `"${TEST_ADMIN_KEY}"` }).problems).toEqual([expect.stringMatching(/^BOOTSTRAP_ADMIN_KEY is quoted/)]);
    expect(parseRawConfigCollecting({ BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY }).problems).toEqual([]);
    const { code, out } = await runGateway(gatewayEnv({ BOOTSTRAP_ADMIN_KEY: `'${TEST_ADMIN_KEY}'` }), () => false, 15_000);
    expect(code, out).toBe(1);
    expect(out).toMatch(/BOOTSTRAP_ADMIN_KEY is quoted/);
    expect(out).not.toContain(TEST_ADMIN_KEY);
  }, 30_000);

  it('DATA_DIR whose folder mkdir cannot make although its parent exists (under /proc): exit 1 naming DATA_DIR, not a busy loop deaf to SIGTERM', async () => {
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', DATA_DIR: '/proc/self/tg-data' };
    const { code, out } = await runGateway(env, () => false, 12_000);
    expect(code, `output: ${out}`).toBe(1);
    expect(out).toMatch(/DATA_DIR/);
  }, 30_000);

  it('DB_POOL_SIZE above the connections the server lets the role open: a start-up warning naming both', async () => {
    const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await c.connect();
    const [{ max_connections: max }] = (await c.query('SHOW max_connections')).rows as { max_connections: string }[];
    await c.end();
    const size = Math.min(500, Number(max) + 50);
    expect(size).toBeGreaterThan(Number(max));
    const gw = await startGatewayProcess({ DB_POOL_SIZE: String(size) });
    const out = gw.output();
    await gw.stop();
    expect(out).toMatch(new RegExp(`DB_POOL_SIZE=${size} .*max_connections ${max}`));
  }, 60_000);

  it('DB_POOL_SIZE within them: no such warning', async () => {
    const gw = await startGatewayProcess({ DB_POOL_SIZE: '5' });
    const out = gw.output();
    expect((await gw.http.get('/v1/tools').set(adminAuth)).status).toBe(200);
    await gw.stop();
    expect(out).not.toMatch(/DB_POOL_SIZE=/);
  }, 60_000);

  it('VENDOR_CONNECT_TIMEOUT_MS=30 (seconds meant) is warned about, as VENDOR_TIMEOUT_MS=60 is', () => {
    const c = loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY, VENDOR_TIMEOUT_MS: '60', VENDOR_CONNECT_TIMEOUT_MS: '30' });
    expect(c.warnings).toContainEqual(expect.stringMatching(/^VENDOR_TIMEOUT_MS=60 /));
    expect(c.warnings).toContainEqual(expect.stringMatching(/^VENDOR_CONNECT_TIMEOUT_MS=30 /));
    expect(loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY, VENDOR_CONNECT_TIMEOUT_MS: '500' }).warnings.filter((w) => w.startsWith('VENDOR_CONNECT'))).toEqual([]);
  });
});

describe('ledger-verify honours DB_QUERY_TIMEOUT_MS (it used the 20 s default whatever was set)', () => {
  let su: pg.Client;
  beforeAll(async () => {
    const mig = await runBuiltCli('migrate', ['run']);
    expect(mig.code, mig.stderr).toBe(0);
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  }, 120_000);
  afterAll(async () => {
    await su?.query('ROLLBACK').catch(() => undefined);
    await su?.end();
  });

  it('DB_QUERY_TIMEOUT_MS=2000: a statement the database does not answer fails within it (exit 3), not after the default', async () => {
    await su.query('BEGIN');
    await su.query('LOCK TABLE runtime_ledger_events IN ACCESS EXCLUSIVE MODE');
    const release = setTimeout(() => void su.query('COMMIT').catch(() => undefined), 10_000);
    const started = Date.now();
    const run = await runBuiltCli('ledger-verify', ['--org', '00000000-0000-0000-0000-000000000000', '--no-seal'], { DB_QUERY_TIMEOUT_MS: '2000' });
    const tookMs = Date.now() - started;
    clearTimeout(release);
    await su.query('COMMIT').catch(() => undefined);
    expect(tookMs, `exit ${String(run.code)}: ${run.stderr}`).toBeLessThan(6_000);
    expect(run.code).toBe(3);
  }, 60_000);
});
