import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, createHmac, hkdfSync, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/common/canonical-json.js';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import { projectRoot } from '../../src/common/project-root.js';
import type { MasterKeyring } from '../../src/config/app-config.js';
import { credentialAad, CredentialsService } from '../../src/credentials/credentials.service.js';
import { KeyRotationService, type RotationSummary } from '../../src/credentials/key-rotation.service.js';
import { vendorTokenAad } from '../../src/credentials/vendor-token.store.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { resultAad } from '../../src/tool-calls/results.store.js';
import { AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, NANGO_SECRET_KEY, SHOPIFY_REFRESH_TOKEN, SHOPIFY_TOKEN, TEST_MASTER_KEY, TEST_MASTER_KEY_2 } from '../support/secrets.js';
import { inputAad } from '../../src/tool-calls/tool-calls.service.js';
import { runBuiltCli, type CliRun } from '../support/built-cli.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { withQueryHook } from '../support/query-hook.js';

const BOTH_KEYS = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' };
const ONLY_K2 = { MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2}` };

const SHOPIFY = { shopDomain: 'rotate-a.myshopify.com', accessToken: SHOPIFY_TOKEN };
const AMAZON = { clientId: 'amzn-client', clientSecret: AMAZON_CLIENT_SECRET, refreshToken: AMAZON_REFRESH_TOKEN, region: 'na' };
const NANGO = { secretKey: NANGO_SECRET_KEY, connectionId: 'conn-b', providerConfigKey: 'zendesk' };
const RESULT_MARKER = 'rotation-result-marker-5c1e';
const TOKEN_STATE = { refreshToken: SHOPIFY_REFRESH_TOKEN, accessToken: 'shpat_rotation_access_token_0001' };
recordMintedSecret('rotation.spec stored access token', TOKEN_STATE.accessToken); // the run-wide leak scan looks for it too

/** The built CLI, as an operator runs it, against the test database. */
const runCli = (env: Record<string, string>, args: string[] = []): Promise<CliRun> => runBuiltCli('credentials-rotate', args, { DATA_DIR: '.tmp/data-test', ...env });

async function rotateWithCli(args: string[] = ['--batch-size=2']): Promise<RotationSummary> {
  const run = await runCli(BOTH_KEYS, args);
  expect(run.code, run.stderr).toBe(0);
  for (const s of [SHOPIFY_TOKEN, AMAZON_CLIENT_SECRET, NANGO_SECRET_KEY, TEST_MASTER_KEY, TEST_MASTER_KEY_2, RESULT_MARKER]) {
    expect(run.stdout + run.stderr).not.toContain(s);
  }
  return JSON.parse(run.stdout) as RotationSummary;
}

/** The built CLI as `runCli` runs it, with its process at hand (to interrupt it). */
function spawnCli(env: Record<string, string>, args: string[]): { child: ChildProcess; out: Promise<CliRun & { signal: string | null }> } {
  const child = spawn(process.execPath, [join(projectRoot(), 'dist/src/cli/credentials-rotate.js'), ...args], {
    cwd: projectRoot(),
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL ?? '', DATA_DIR: '.tmp/data-test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  teeChildToRunLog(child, 'CLI dist/src/cli/credentials-rotate.js');
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const out = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as string | null, stdout, stderr }));
  return { child, out };
}

/** Until the running CLI waits for a row lock in an UPDATE of `table` (held by the test). */
async function waitForBlockedUpdate(ds: DataSource, table: string, run: Promise<unknown>): Promise<void> {
  let done: unknown;
  void run.then((r) => (done = r));
  for (let i = 0; i < 200; i++) {
    if (done) throw new Error('the CLI exited: ' + JSON.stringify(done));
    const waiting = (await ds.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE $1`, [`UPDATE ${table}%`])) as unknown[];
    if (waiting.length > 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the CLI never blocked on the locked row');
}

/** A credentials.rotated event's metadata without the run's stamp (rotationId, by): what it counts. */
function counted(metadata: Record<string, unknown>): Record<string, unknown> {
  const { rotationId: _run, by: _by, ...counts } = metadata;
  return counts;
}

/** An org's credentials.rotated events, their counts summed (a run records one per org and batch). */
function rotatedTotals(events: { org_id: string; metadata: Record<string, unknown> }[]): Record<string, Record<string, unknown>> {
  const totals: Record<string, Record<string, unknown>> = {};
  for (const { org_id, metadata } of events) {
    const sum = (totals[org_id] ??= {});
    for (const [k, v] of Object.entries(counted(metadata))) sum[k] = typeof v === 'number' ? ((sum[k] as number | undefined) ?? 0) + v : v;
  }
  return totals;
}

/** The distinct stamps (rotationId, by) of the events: one per run. */
const stampsOf = (events: { metadata: Record<string, unknown> }[]): unknown[] => [
  ...new Map(events.map(({ metadata: { rotationId, by } }) => [JSON.stringify([rotationId, by]), { rotationId, by }])).values(),
];

const keyringOf = (entries: [string, string][], activeKeyId: string): MasterKeyring => ({
  activeKeyId,
  keys: new Map(entries.map(([id, b64]) => [id, Buffer.from(b64, 'base64')])),
});

async function insertResult(ds: DataSource, cipher: EnvelopeCipher, orgId: string, toolCallId: string): Promise<void> {
  const json = JSON.stringify({ orderId: '#1001', note: RESULT_MARKER, toolCallId });
  const env = cipher.encrypt(json, resultAad(orgId, toolCallId));
  await ds.query(
    `INSERT INTO tool_call_results (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag, size_bytes, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '1 day')`,
    [toolCallId, orgId, env.keyId, env.iv, env.ciphertext, env.authTag, Buffer.byteLength(json)],
  );
}

interface Stored {
  key_id: string;
  iv: Buffer;
}

describe('master key rotation (npm run credentials:rotate)', () => {
  let orgA: string;
  let orgB: string;
  const resultsA = Array.from({ length: 5 }, () => randomUUID());
  const resultB = randomUUID();
  const k1Only = new EnvelopeCipher(keyringOf([['k1', TEST_MASTER_KEY]], 'k1'));
  let t2: TestApp | undefined;

  const credentialRows = async (ds: DataSource) =>
    (await ds.query(`SELECT org_id, integration_type, key_id, iv FROM integration_credentials WHERE org_id IN ($1, $2) ORDER BY org_id, integration_type`, [
      orgA,
      orgB,
    ])) as (Stored & { org_id: string; integration_type: string })[];
  const resultRows = async (ds: DataSource) =>
    (await ds.query(`SELECT tool_call_id, key_id, iv FROM tool_call_results WHERE org_id IN ($1, $2) ORDER BY tool_call_id`, [orgA, orgB])) as (Stored & {
      tool_call_id: string;
    })[];
  const rotatedEvents = async (ds: DataSource) =>
    (await ds.query(`SELECT org_id, metadata, metadata::text AS text FROM runtime_ledger_events WHERE type = 'credentials.rotated' AND org_id IN ($1, $2) ORDER BY seq`, [
      orgA,
      orgB,
    ])) as { org_id: string; metadata: Record<string, unknown>; text: string }[];

  const pendingInputId = randomUUID();
  beforeAll(async () => {
    // Everything written under key k1 alone, as before any rotation.
    const t1 = await startTestApp();
    try {
      orgA = await createOrg(t1, 'Rotate A');
      orgB = await createOrg(t1, 'Rotate B');
      for (const [org, type, config] of [
        [orgA, 'shopify', SHOPIFY],
        [orgA, 'amazon', AMAZON],
        [orgB, 'nango', NANGO],
      ] as const) {
        const res = await t1.http.put(`/v1/orgs/${org}/integrations/${type}/credentials`).set(adminAuth).send({ config });
        expect(res.status).toBe(200);
        expect(res.body.keyId).toBe('k1');
      }
      const cipher = t1.app.get(EnvelopeCipher);
      for (const id of resultsA) await insertResult(t1.ds, cipher, orgA, id);
      await insertResult(t1.ds, cipher, orgB, resultB);
      // The raw params of a call waiting for approval are encrypted the same way and rotate too.
      const input = cipher.encryptJson({ orderId: '12345', amount: '1.00' }, inputAad(orgA, pendingInputId));
      await t1.ds.query('INSERT INTO tool_call_inputs (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag) VALUES ($1, $2, $3, $4, $5, $6)', [
        pendingInputId, orgA, input.keyId, input.iv, input.ciphertext, input.authTag,
      ]);
      // So does the token state of a rotating refresh-token grant (a public Shopify app's).
      const state = cipher.encryptJson(TOKEN_STATE, vendorTokenAad(orgA, 'shopify'));
      await t1.ds.query(
        `INSERT INTO vendor_tokens (org_id, integration_type, grant_id, key_id, iv, ciphertext, auth_tag, access_expires_at)
         VALUES ($1, 'shopify', 'grant-a', $2, $3, $4, $5, now() + interval '1 hour')
         ON CONFLICT (org_id, integration_type) DO UPDATE SET grant_id = EXCLUDED.grant_id, key_id = EXCLUDED.key_id, iv = EXCLUDED.iv,
           ciphertext = EXCLUDED.ciphertext, auth_tag = EXCLUDED.auth_tag, access_expires_at = EXCLUDED.access_expires_at`,
        [orgA, state.keyId, state.iv, state.ciphertext, state.authTag],
      );
    } finally {
      await t1.close();
    }
  });
  afterAll(async () => {
    await t2?.close();
  });

  it('re-encrypts every credential and result under the active key, in batches, with events counting every row per org', async () => {
    t2 = await startTestApp(BOTH_KEYS);
    const beforeCreds = await credentialRows(t2.ds);
    expect(beforeCreds.map((r) => r.key_id)).toEqual(['k1', 'k1', 'k1']);

    const summary = await rotateWithCli(['--batch-size=2']);
    expect(summary.toKeyId).toBe('k2');
    expect(summary.credentials.rotated).toBeGreaterThanOrEqual(3);
    expect(summary.results.rotated).toBeGreaterThanOrEqual(6);
    expect(summary.credentials.skipped + summary.results.skipped).toBe(0);
    const mine = new Set([orgA, orgB]);
    expect(summary.failures.filter((f) => mine.has(f.orgId))).toEqual([]);

    const creds = await credentialRows(t2.ds);
    expect(creds.map((r) => r.key_id)).toEqual(['k2', 'k2', 'k2']);
    for (let i = 0; i < creds.length; i++) expect(creds[i].iv.equals(beforeCreds[i].iv)).toBe(false);
    expect((await resultRows(t2.ds)).map((r) => r.key_id)).toEqual(Array(6).fill('k2'));
    // Nothing decryptable was left behind anywhere: what is not under k2 is exactly what was reported.
    const [{ n }] = (await t2.ds.query(
      `SELECT (SELECT count(*) FROM integration_credentials WHERE key_id <> 'k2') + (SELECT count(*) FROM tool_call_results WHERE key_id <> 'k2') AS n`,
    )) as [{ n: string }];
    expect(Number(n)).toBe(summary.credentials.failed + summary.results.failed);

    const events = await rotatedEvents(t2.ds);
    // Each names the run (its summary's rotationId) and who ran it: no API key stands behind the command.
    expect(stampsOf(events)).toEqual([{ rotationId: summary.rotationId, by: { command: 'credentials:rotate', host: hostname(), user: userInfo().username } }]);
    // One per org and batch (each committed with its batch's rows), together counting each rotated row once.
    expect(rotatedTotals(events)).toEqual({
      [orgA]: { toKeyId: 'k2', credentials: 2, results: 5, inputs: 1, tokens: 1 },
      [orgB]: { toKeyId: 'k2', credentials: 1, results: 1, inputs: 0 },
    });
    expect(summary.credentials.remaining + summary.results.remaining + summary.inputs.remaining + summary.tokens.remaining).toBe(0);
    expect(summary.tokens.rotated).toBeGreaterThanOrEqual(1);
    const [token] = (await t2.ds.query(`SELECT key_id, iv, ciphertext, auth_tag FROM vendor_tokens WHERE org_id = $1`, [orgA])) as (Stored & {
      ciphertext: Buffer;
      auth_tag: Buffer;
    })[];
    const k2Only = new EnvelopeCipher(keyringOf([['k2', TEST_MASTER_KEY_2]], 'k2'));
    expect(k2Only.decryptJson({ keyId: token.key_id, iv: token.iv, ciphertext: token.ciphertext, authTag: token.auth_tag }, vendorTokenAad(orgA, 'shopify'))).toEqual(TOKEN_STATE);

    // The listing shows the new key id, and the fingerprint keyed by it (recomputed from the plaintext): what a PUT
    // of the same config under k2 would answer.
    const list = await t2.http.get(`/v1/orgs/${orgA}/integrations`).set(adminAuth);
    const items = (list.body as { items: { integrationType: string; keyId: string; fingerprint: string }[] }).items;
    expect(items.map((i) => [i.integrationType, i.keyId, i.fingerprint])).toEqual([
      ['amazon', 'k2', k2Only.fingerprint(AMAZON, credentialAad(orgA, 'amazon'))],
      ['shopify', 'k2', k2Only.fingerprint(SHOPIFY, credentialAad(orgA, 'shopify'))],
    ]);
  });

  it('is idempotent: a second run rewrites nothing and records no event', async () => {
    const credsBefore = await credentialRows(t2!.ds);
    const resultsBefore = await resultRows(t2!.ds);
    const eventsBefore = (await rotatedEvents(t2!.ds)).length;
    const summary = await rotateWithCli([]);
    expect(summary.credentials).toMatchObject({ rotated: 0, skipped: 0 });
    expect(summary.results).toMatchObject({ rotated: 0, skipped: 0 });
    expect(summary.orgsTouched).toBe(0);
    const credsAfter = await credentialRows(t2!.ds);
    const resultsAfter = await resultRows(t2!.ds);
    for (let i = 0; i < credsAfter.length; i++) expect(credsAfter[i].iv.equals(credsBefore[i].iv)).toBe(true);
    for (let i = 0; i < resultsAfter.length; i++) expect(resultsAfter[i].iv.equals(resultsBefore[i].iv)).toBe(true);
    expect(await rotatedEvents(t2!.ds)).toHaveLength(eventsBefore);
  });

  it('finishes a partly rotated table (a row still under k1) on a re-run', async () => {
    const ds = t2!.ds;
    const env = k1Only.encryptJson(SHOPIFY, credentialAad(orgA, 'shopify'));
    await ds.query(`UPDATE integration_credentials SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4 WHERE org_id = $5 AND integration_type = 'shopify'`, [
      env.keyId,
      env.iv,
      env.ciphertext,
      env.authTag,
      orgA,
    ]);
    const back = resultsA[2];
    const json = JSON.stringify({ orderId: '#1001', note: RESULT_MARKER, toolCallId: back });
    const renv = k1Only.encrypt(json, resultAad(orgA, back));
    await ds.query(`UPDATE tool_call_results SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4 WHERE tool_call_id = $5`, [
      renv.keyId,
      renv.iv,
      renv.ciphertext,
      renv.authTag,
      back,
    ]);
    const eventsBefore = (await rotatedEvents(ds)).length;
    const summary = await rotateWithCli(['--batch-size=1']);
    expect(summary.credentials.rotated).toBe(1);
    expect(summary.results.rotated).toBe(1);
    expect((await credentialRows(ds)).every((r) => r.key_id === 'k2')).toBe(true);
    expect((await resultRows(ds)).every((r) => r.key_id === 'k2')).toBe(true);
    expect((await rotatedEvents(ds)).slice(eventsBefore).map((e) => [e.org_id, counted(e.metadata)])).toEqual([
      [orgA, { toKeyId: 'k2', credentials: 1, results: 0, inputs: 0 }],
      [orgA, { toKeyId: 'k2', credentials: 0, results: 1, inputs: 0 }],
    ]);
  });

  it('refuses (exit 2) without master keys instead of making up a development key that opens nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotate-nokeys-'));
    try {
      const run = await runCli({ NODE_ENV: '', DATA_DIR: dir });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/MASTER_ENCRYPTION_KEYS .* and MASTER_ENCRYPTION_ACTIVE_KEY_ID .* are required/);
      expect(run.stdout).toBe('');
      expect(existsSync(join(dir, 'master.key'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ['MASTER_ENCRYPTION_KEYS of only spaces, an active key id', { MASTER_ENCRYPTION_KEYS: '  ', MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' }],
    ['both key variables of only spaces or a newline', { MASTER_ENCRYPTION_KEYS: ' ', MASTER_ENCRYPTION_KEY: '\n', MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' }],
    ['MASTER_ENCRYPTION_ACTIVE_KEY_ID alone', { MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' }],
  ])('reads the key variables as the configuration does (a blank one is unset): %s is refused (exit 2), no development key made', async (_what, env) => {
    const dir = mkdtempSync(join(tmpdir(), 'rotate-blank-keys-'));
    try {
      const run = await runCli({ NODE_ENV: '', DATA_DIR: dir, ...env });
      expect({ code: run.code, devKeyMade: existsSync(join(dir, 'master.key')) }, run.stdout + run.stderr).toEqual({ code: 2, devKeyMade: false });
      expect(run.stderr).toMatch(/MASTER_ENCRYPTION_KEYS .* and MASTER_ENCRYPTION_ACTIVE_KEY_ID .* are required/);
      expect(run.stderr).toContain('MASTER_ENCRYPTION_ACTIVE_KEY_ID is set but no key is');
      expect(run.stdout).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses (exit 2) several keys without MASTER_ENCRYPTION_ACTIVE_KEY_ID instead of re-encrypting under the first one listed', async () => {
    const before = await credentialRows(t2!.ds);
    expect(before.map((r) => r.key_id)).toEqual(['k2', 'k2', 'k2']);
    // The old key listed first: the configuration alone would make it the active one.
    const run = await runCli({ MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k1:${TEST_MASTER_KEY},k2:${TEST_MASTER_KEY_2}` });
    expect(run.code, run.stdout).toBe(2);
    expect(run.stderr).toMatch(/MASTER_ENCRYPTION_ACTIVE_KEY_ID is required with MASTER_ENCRYPTION_KEYS/);
    expect(run.stderr).not.toContain(TEST_MASTER_KEY);
    expect(run.stdout).toBe('');
    const after = await credentialRows(t2!.ds);
    expect(after.map((r) => [r.key_id, r.iv.toString('hex')])).toEqual(before.map((r) => [r.key_id, r.iv.toString('hex')]));
    expect((await resultRows(t2!.ds)).every((r) => r.key_id === 'k2')).toBe(true);
  });

  it('lets a concurrent writer win: a row rewritten between read and update is skipped, not overwritten', async () => {
    const app = t2!;
    const env = k1Only.encryptJson(NANGO, credentialAad(orgB, 'nango'));
    await app.ds.query(`UPDATE integration_credentials SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4 WHERE org_id = $5 AND integration_type = 'nango'`, [
      env.keyId,
      env.iv,
      env.ciphertext,
      env.authTag,
      orgB,
    ]);
    const newer = { ...NANGO, connectionId: 'conn-b-newer' };
    let raced = false;
    // The admin's PUT lands after the rotation read the row and before its UPDATE.
    const racing = withQueryHook(app.ds, async (sql) => {
      if (!raced && sql.startsWith('UPDATE integration_credentials')) {
        raced = true;
        const put = await app.http.put(`/v1/orgs/${orgB}/integrations/nango/credentials`).set(adminAuth).send({ config: newer });
        expect(put.status).toBe(200);
      }
    });
    const svc = new KeyRotationService(racing, app.app.get(EnvelopeCipher), app.app.get(LedgerEventsService));
    const summary = await svc.rotate();
    expect(raced).toBe(true);
    expect(summary.credentials).toMatchObject({ rotated: 0, skipped: 1 });
    const creds = app.app.get(CredentialsService);
    creds.clearCache();
    expect(await creds.load(orgB, 'nango')).toEqual(newer);
  });

  it('gives a credential already under the active key, but with the unkeyed fingerprint of earlier versions, its keyed one', async () => {
    const app = t2!;
    const k2 = app.app.get(EnvelopeCipher);
    const config = { ...NANGO, connectionId: 'conn-b-newer' }; // as the test above left it
    const env = k2.encryptJson(config, credentialAad(orgB, 'nango'));
    const legacy = 'sha256:' + createHash('sha256').update(JSON.stringify(config)).digest('hex').slice(0, 16);
    await app.ds.query(
      `UPDATE integration_credentials SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4, fingerprint = $5 WHERE org_id = $6 AND integration_type = 'nango'`,
      [env.keyId, env.iv, env.ciphertext, env.authTag, legacy, orgB],
    );
    const svc = new KeyRotationService(app.ds, k2, app.app.get(LedgerEventsService));
    expect((await svc.rotate()).credentials).toMatchObject({ rotated: 1, failed: 0 });
    const [row] = (await app.ds.query(`SELECT key_id, fingerprint FROM integration_credentials WHERE org_id = $1 AND integration_type = 'nango'`, [orgB])) as {
      key_id: string;
      fingerprint: string;
    }[];
    expect(row).toEqual({ key_id: 'k2', fingerprint: k2.fingerprint(config, credentialAad(orgB, 'nango')) });
    // Nothing left to do on a second run.
    expect((await svc.rotate()).credentials).toMatchObject({ rotated: 0, skipped: 0 });
  });

  it('gives credentials already under the active key, but with the keyed fingerprint of earlier versions not bound to the org, the bound one', async () => {
    const app = t2!;
    const k2 = app.app.get(EnvelopeCipher);
    // The earlier keyed form: an HMAC of the config alone, equal across orgs (so the same for orgA's copy below).
    const unboundKey = Buffer.from(hkdfSync('sha256', Buffer.from(TEST_MASTER_KEY_2, 'base64'), Buffer.alloc(0), 'credential-fingerprint-v1', 32));
    const unbound = (v: unknown) => 'hmac:' + createHmac('sha256', unboundKey).update(canonicalJson(v)).digest('hex').slice(0, 16);
    const config = { ...NANGO, connectionId: 'conn-b-newer' }; // as the tests above left it
    for (const org of [orgA, orgB]) {
      const env = k2.encryptJson(config, credentialAad(org, 'nango'));
      await app.ds.query(
        `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, 'nango', $2, $3, $4, $5, $6)
         ON CONFLICT (org_id, integration_type) DO UPDATE SET key_id = EXCLUDED.key_id, iv = EXCLUDED.iv, ciphertext = EXCLUDED.ciphertext,
           auth_tag = EXCLUDED.auth_tag, fingerprint = EXCLUDED.fingerprint`,
        [org, env.keyId, env.iv, env.ciphertext, env.authTag, unbound(config)],
      );
    }
    try {
      const svc = new KeyRotationService(app.ds, k2, app.app.get(LedgerEventsService));
      const summary = await svc.rotate();
      expect(summary.credentials.failed).toBe(0);
      expect(summary.credentials.rotated).toBeGreaterThanOrEqual(2);
      const rows = (await app.ds.query(`SELECT org_id, key_id, fingerprint FROM integration_credentials WHERE org_id IN ($1, $2) AND integration_type = 'nango'`, [
        orgA,
        orgB,
      ])) as { org_id: string; key_id: string; fingerprint: string }[];
      expect(Object.fromEntries(rows.map((r) => [r.org_id, [r.key_id, r.fingerprint]]))).toEqual({
        [orgA]: ['k2', k2.fingerprint(config, credentialAad(orgA, 'nango'))],
        [orgB]: ['k2', k2.fingerprint(config, credentialAad(orgB, 'nango'))],
      });
      expect(rows[0].fingerprint).not.toBe(rows[1].fingerprint);
      // Every row of these orgs is in the current form now, and a second run has nothing left to do.
      const [{ n }] = (await app.ds.query(`SELECT count(*)::int AS n FROM integration_credentials WHERE org_id IN ($1, $2) AND fingerprint NOT LIKE 'hmac-v2:%'`, [
        orgA,
        orgB,
      ])) as [{ n: number }];
      expect(n).toBe(0);
      expect((await svc.rotate()).credentials).toMatchObject({ rotated: 0, skipped: 0 });
    } finally {
      await app.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1 AND integration_type = 'nango'`, [orgA]);
    }
  });

  it('a failure part-way keeps the batches done, each with its events, and leaves no rotated row without its event', async () => {
    const app = t2!;
    const underK1 = async () => {
      for (const [type, config] of [['shopify', SHOPIFY], ['amazon', AMAZON]] as const) {
        const env = k1Only.encryptJson(config, credentialAad(orgA, type));
        await app.ds.query(`UPDATE integration_credentials SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4 WHERE org_id = $5 AND integration_type = $6`, [
          env.keyId, env.iv, env.ciphertext, env.authTag, orgA, type,
        ]);
      }
    };
    const keysOfA = async () => Object.fromEntries((await credentialRows(app.ds)).filter((r) => r.org_id === orgA).map((r) => [r.integration_type, r.key_id]));
    const ledger = app.app.get(LedgerEventsService);

    // The second batch's UPDATE fails: the first batch (amazon) stays rotated, and its event is on record.
    await underK1();
    let eventsBefore = (await rotatedEvents(app.ds)).length;
    let updates = 0;
    const failing = withQueryHook(app.ds, (sql) => {
      if (sql.startsWith('UPDATE integration_credentials') && ++updates === 2) throw new Error('connection lost');
    });
    await expect(new KeyRotationService(failing, app.app.get(EnvelopeCipher), ledger).rotate({ batchSize: 1 })).rejects.toThrow('connection lost');
    expect(updates).toBe(2);
    expect(await keysOfA()).toEqual({ amazon: 'k2', shopify: 'k1' });
    expect((await rotatedEvents(app.ds)).slice(eventsBefore).map((e) => [e.org_id, counted(e.metadata)])).toEqual([
      [orgA, { toKeyId: 'k2', credentials: 1, results: 0, inputs: 0 }],
    ]);

    // Recording the events fails: the batch's rows are not rotated either (a re-run rotates and records them).
    await underK1();
    eventsBefore = (await rotatedEvents(app.ds)).length;
    const noLedger = { append: async () => Promise.reject(new Error('append failed')) } as unknown as LedgerEventsService;
    await expect(new KeyRotationService(app.ds, app.app.get(EnvelopeCipher), noLedger).rotate()).rejects.toThrow('append failed');
    expect(await keysOfA()).toEqual({ amazon: 'k1', shopify: 'k1' });
    expect(await rotatedEvents(app.ds)).toHaveLength(eventsBefore);
    expect((await new KeyRotationService(app.ds, app.app.get(EnvelopeCipher), ledger).rotate()).credentials).toMatchObject({ rotated: 2, remaining: 0 });
    expect((await rotatedEvents(app.ds)).slice(eventsBefore).map((e) => [e.org_id, counted(e.metadata)])).toEqual([
      [orgA, { toKeyId: 'k2', credentials: 2, results: 0, inputs: 0 }],
    ]);
  });

  it('reports a row no loaded key opens, skips it and carries on (exit 1)', async () => {
    const ds = t2!.ds;
    const stranger = new EnvelopeCipher(keyringOf([['k0', Buffer.alloc(32, 3).toString('base64')]], 'k0'));
    const lost = randomUUID();
    await insertResult(ds, stranger, orgB, lost);
    const ok = randomUUID();
    await insertResult(ds, k1Only, orgB, ok);
    try {
      const run = await runCli(BOTH_KEYS);
      expect(run.code).toBe(1);
      const summary = JSON.parse(run.stdout) as RotationSummary;
      expect(summary.results.failed).toBeGreaterThanOrEqual(1);
      expect(summary.failures).toContainEqual({ kind: 'results', orgId: orgB, toolCallId: lost, keyId: 'k0' });
      expect(run.stdout).not.toContain(RESULT_MARKER);
      const rows = (await ds.query(`SELECT tool_call_id, key_id FROM tool_call_results WHERE tool_call_id IN ($1, $2)`, [lost, ok])) as {
        tool_call_id: string;
        key_id: string;
      }[];
      expect(Object.fromEntries(rows.map((r) => [r.tool_call_id, r.key_id]))).toEqual({ [lost]: 'k0', [ok]: 'k2' });
    } finally {
      await ds.query(`DELETE FROM tool_call_results WHERE tool_call_id = $1`, [lost]);
    }
  });

  it('an approval input no loaded key opens is a failure too (exit 1): removing the old key would strand that approval', async () => {
    const ds = t2!.ds;
    const stranger = new EnvelopeCipher(keyringOf([['k0', Buffer.alloc(32, 3).toString('base64')]], 'k0'));
    const lost = randomUUID();
    const env = stranger.encrypt(JSON.stringify({ orderId: '12345', amount: '1.00', note: RESULT_MARKER }), inputAad(orgB, lost));
    await ds.query(`INSERT INTO tool_call_inputs (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag) VALUES ($1, $2, $3, $4, $5, $6)`, [
      lost, orgB, env.keyId, env.iv, env.ciphertext, env.authTag,
    ]);
    try {
      const run = await runCli(BOTH_KEYS);
      const summary = JSON.parse(run.stdout) as RotationSummary;
      expect(summary.credentials.failed + summary.results.failed).toBe(0);
      expect(summary.inputs.failed, run.stdout + run.stderr).toBe(1);
      expect(summary.failures).toContainEqual({ kind: 'inputs', orgId: orgB, toolCallId: lost, keyId: 'k0' });
      expect(run.code).toBe(1);
      expect(run.stdout).not.toContain(RESULT_MARKER);
    } finally {
      await ds.query(`DELETE FROM tool_call_inputs WHERE tool_call_id = $1`, [lost]);
    }
  });

  /** A credential of `orgId` written (or overwritten) under `cipher`, as the gateway writes it. */
  async function putCredential(ds: DataSource, orgId: string, cipher: EnvelopeCipher, type = 'nango', config: object = NANGO): Promise<void> {
    const env = cipher.encryptJson(config, credentialAad(orgId, type));
    await ds.query(
      `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (org_id, integration_type) DO UPDATE SET key_id = EXCLUDED.key_id, iv = EXCLUDED.iv, ciphertext = EXCLUDED.ciphertext,
         auth_tag = EXCLUDED.auth_tag, fingerprint = EXCLUDED.fingerprint`,
      [orgId, type, env.keyId, env.iv, env.ciphertext, env.authTag, cipher.fingerprint(config, credentialAad(orgId, type))],
    );
  }

  it('does not report "all done" (exit 0) while a writer still on the old key has rewritten a row under it during the run', async () => {
    const app = t2!;
    const org = await createOrg(app, 'Rotate lagging writer');
    await putCredential(app.ds, org, k1Only);
    const writer = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await writer.connect();
    try {
      // A replica not yet switched to k2 holds the row while the CLI reads it, then rewrites it under k1.
      await writer.query('BEGIN');
      await writer.query(`SELECT 1 FROM integration_credentials WHERE org_id = $1 FOR UPDATE`, [org]);
      const running = runCli(BOTH_KEYS);
      await waitForBlockedUpdate(app.ds, 'integration_credentials', running);
      const env = k1Only.encryptJson({ ...NANGO, connectionId: 'conn-lagging' }, credentialAad(org, 'nango'));
      await writer.query(`UPDATE integration_credentials SET key_id = $1, iv = $2, ciphertext = $3, auth_tag = $4 WHERE org_id = $5`, [
        env.keyId, env.iv, env.ciphertext, env.authTag, org,
      ]);
      await writer.query('COMMIT');
      const run = await running;
      // Exit 0 is the operator's cue to remove k1: not while a row still needs it.
      expect(run.code).toBe(1);
      const summary = JSON.parse(run.stdout) as RotationSummary;
      expect(summary.credentials).toMatchObject({ skipped: 1, failed: 0, remaining: 1 });
      expect(summary.results.remaining + summary.inputs.remaining + summary.tokens.remaining).toBe(0);
      const [row] = (await app.ds.query(`SELECT key_id FROM integration_credentials WHERE org_id = $1`, [org])) as { key_id: string }[];
      expect(row.key_id).toBe('k1');
      expect(run.stderr).toContain('1 rows still under other keys than k2: re-run; is a writer still using the old key?');
      // Once the writer is on k2, a re-run finishes the job.
      const rerun = await runCli(BOTH_KEYS);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect((JSON.parse(rerun.stdout) as RotationSummary).credentials).toMatchObject({ rotated: 1, remaining: 0 });
    } finally {
      await writer.end();
      await app.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
    }
  });

  it('an interrupted run has recorded a credentials.rotated event for every row it rotated; the re-run records the rest, none twice', async () => {
    const app = t2!;
    const [first, second] = [await createOrg(app, 'Rotate interrupted A'), await createOrg(app, 'Rotate interrupted B')].sort();
    expect((await runCli(BOTH_KEYS)).code).toBe(0); // nothing else under k1: the run below sees only these rows
    await putCredential(app.ds, first, k1Only, 'nango');
    await putCredential(app.ds, first, k1Only, 'shopify', SHOPIFY);
    await putCredential(app.ds, second, k1Only, 'nango');
    const [{ seq }] = (await app.ds.query(`SELECT coalesce(max(seq), 0)::text AS seq FROM runtime_ledger_events`)) as [{ seq: string }];
    const eventsOf = async () =>
      (await app.ds.query(`SELECT org_id, metadata FROM runtime_ledger_events WHERE type = 'credentials.rotated' AND org_id IN ($1, $2) AND seq > $3::bigint ORDER BY seq`, [
        first,
        second,
        seq,
      ])) as { org_id: string; metadata: Record<string, unknown> }[];
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    let interruptedStderr: string | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM integration_credentials WHERE org_id = $1 FOR UPDATE`, [second]);
      const { child, out } = spawnCli(BOTH_KEYS, ['--batch-size=1']);
      await waitForBlockedUpdate(app.ds, 'integration_credentials', out);
      // The first org's rows are rotated, and on record, while the run is still going.
      const keys = (await app.ds.query(`SELECT key_id FROM integration_credentials WHERE org_id = $1`, [first])) as { key_id: string }[];
      expect(keys.map((r) => r.key_id)).toEqual(['k2', 'k2']);
      expect(rotatedTotals(await eventsOf())).toEqual({ [first]: { toKeyId: 'k2', credentials: 2, results: 0, inputs: 0 } });
      child.kill('SIGINT'); // the README: "interrupt and re-run freely"
      const interrupted = await out;
      expect(interrupted.signal ?? interrupted.code).toBeTruthy();
      interruptedStderr = interrupted.stderr;
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    const rerun = await runCli(BOTH_KEYS);
    expect(rerun.code, rerun.stderr).toBe(0);
    const keys = (await app.ds.query(`SELECT key_id FROM integration_credentials WHERE org_id IN ($1, $2)`, [first, second])) as { key_id: string }[];
    expect(keys.map((k) => k.key_id)).toEqual(['k2', 'k2', 'k2']);
    // Every rotated row's org has its event (the interrupted batch's UPDATE went with its event), and none counts a row twice.
    expect(rotatedTotals(await eventsOf())).toEqual({
      [first]: { toKeyId: 'k2', credentials: 2, results: 0, inputs: 0 },
      [second]: { toKeyId: 'k2', credentials: 1, results: 0, inputs: 0 },
    });
    // Two runs, each its own id: the interrupted one's events are told from the re-run's.
    const runs = stampsOf(await eventsOf()) as { rotationId: string }[];
    expect(runs).toHaveLength(2);
    expect(runs[1].rotationId).toBe((JSON.parse(rerun.stdout) as RotationSummary).rotationId);
    // The interrupted run printed no summary, but said its id before it began: its events are found by it.
    const started = /^rotation ([0-9a-f-]{36}) started: its credentials\.rotated events carry this rotationId$/m.exec(interruptedStderr ?? '');
    expect(started?.[1], interruptedStderr).toBe(runs[0].rotationId);
    await app.ds.query(`DELETE FROM integration_credentials WHERE org_id IN ($1, $2)`, [first, second]);
  });

  it('refuses (exit 2) a key id given new material while rows under it are sealed with the old: it would rotate nothing and strand them', async () => {
    const app = t2!;
    const org = await createOrg(app, 'Rotate reused id');
    // After a first rotation k1 -> k2 every row is "k2", sealed under TEST_MASTER_KEY_2. The second rotation reuses
    // the id k2 for the new key and lists the old one as k1.
    const k2Old = new EnvelopeCipher(keyringOf([['k2', TEST_MASTER_KEY_2]], 'k2'));
    await putCredential(app.ds, org, k2Old);
    const [before] = (await app.ds.query(`SELECT key_id, iv FROM integration_credentials WHERE org_id = $1`, [org])) as Stored[];
    const eventsBefore = (await app.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE type = 'credentials.rotated'`)) as [{ n: number }];
    try {
      const fresh = randomBytes(32).toString('base64');
      const run = await runCli({ MASTER_ENCRYPTION_KEY: '', MASTER_ENCRYPTION_KEYS: `k2:${fresh},k1:${TEST_MASTER_KEY_2}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k2' });
      expect(run.code, run.stdout + run.stderr).toBe(2);
      expect(run.stderr).toContain('key id k2 names different material than its rows (credentials): give the new key a new id');
      expect(run.stdout).toBe('');
      expect(run.stderr).not.toContain(fresh);
      const [after] = (await app.ds.query(`SELECT key_id, iv FROM integration_credentials WHERE org_id = $1`, [org])) as Stored[];
      expect([after.key_id, after.iv.equals(before.iv)]).toEqual(['k2', true]);
      expect(await app.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE type = 'credentials.rotated'`)).toEqual(eventsBefore);
    } finally {
      await app.ds.query(`DELETE FROM integration_credentials WHERE org_id = $1`, [org]);
    }
  });

  it('decrypts everything with only the new key loaded', async () => {
    await t2?.close();
    t2 = undefined;
    const t3 = await startTestApp(ONLY_K2);
    try {
      expect(t3.config.keyring.keys.has('k1')).toBe(false);
      const creds = t3.app.get(CredentialsService);
      creds.clearCache();
      expect(await creds.load(orgA, 'shopify')).toEqual(SHOPIFY);
      expect(await creds.load(orgA, 'amazon')).toEqual(AMAZON);
      expect(await creds.load(orgB, 'nango')).toEqual({ ...NANGO, connectionId: 'conn-b-newer' });
      const cipher = t3.app.get(EnvelopeCipher);
      const rows = (await t3.ds.query(`SELECT tool_call_id, org_id, key_id, iv, ciphertext, auth_tag FROM tool_call_results WHERE org_id IN ($1, $2)`, [
        orgA,
        orgB,
      ])) as { tool_call_id: string; org_id: string; key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer }[];
      expect(rows.length).toBe(7);
      for (const r of rows) {
        const value = cipher.decryptJson<{ toolCallId: string; note: string }>(
          { keyId: r.key_id, iv: r.iv, ciphertext: r.ciphertext, authTag: r.auth_tag },
          resultAad(r.org_id, r.tool_call_id),
        );
        expect(value).toMatchObject({ toolCallId: r.tool_call_id, note: RESULT_MARKER });
      }
      const [inp] = (await t3.ds.query('SELECT key_id, iv, ciphertext, auth_tag FROM tool_call_inputs WHERE tool_call_id = $1', [pendingInputId])) as {
        key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer;
      }[];
      expect(inp.key_id).toBe('k2');
      expect(cipher.decryptJson({ keyId: inp.key_id, iv: inp.iv, ciphertext: inp.ciphertext, authTag: inp.auth_tag }, inputAad(orgA, pendingInputId))).toEqual({
        orderId: '12345', amount: '1.00',
      });
      expect(t3.logs.join('\n')).not.toContain(SHOPIFY_TOKEN);
    } finally {
      await t3.close();
    }
  });

  it('refuses to run without DATABASE_URL or with a bad key configuration (exit 2)', async () => {
    const noDb = await runCli({ ...BOTH_KEYS, DATABASE_URL: '' });
    expect(noDb.code).toBe(2);
    expect(noDb.stderr).toContain('DATABASE_URL is required');
    const badKey = await runCli({ MASTER_ENCRYPTION_KEYS: `k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k3' });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('MASTER_ENCRYPTION_ACTIVE_KEY_ID');
    expect(badKey.stderr).not.toContain(TEST_MASTER_KEY);
    const badArg = await runCli(BOTH_KEYS, ['--batch-size=zero']);
    expect(badArg.code).toBe(2);
    expect(badArg.stderr).toContain('unknown argument #1 (--batch-size=…)');
  });

  it.each([
    ['a DATABASE_URL with its password', 'DATABASE_URL=postgres://gw:Pw4u9xQz@db/tg', '#2 (DATABASE_URL=…)', ['Pw4u9xQz']],
    [
      'a master key list',
      `MASTER_ENCRYPTION_KEYS=k2:${TEST_MASTER_KEY_2},k1:${TEST_MASTER_KEY}`,
      '#2 (MASTER_ENCRYPTION_KEYS=…)',
      [TEST_MASTER_KEY_2.slice(0, 12), TEST_MASTER_KEY.slice(0, 12)],
    ],
    ['a bare key', TEST_MASTER_KEY_2, '#2;', [TEST_MASTER_KEY_2.slice(0, 12)]],
  ])('an unknown argument is named by its position, never quoted: %s given after `--` by mistake stays off the terminal (exit 2)', async (_what, arg, named, secrets) => {
    const run = await runCli(BOTH_KEYS, ['--batch-size=5', arg]);
    expect(run.code).toBe(2);
    // A configuration variable given as an argument is named (not its value), so the operator sees what went wrong.
    expect(run.stderr).toContain(`unknown argument ${named}`);
    expect(run.stderr).toContain('usage: credentials-rotate [--batch-size=N]');
    for (const s of secrets) expect(run.stdout + run.stderr).not.toContain(s);
  });
});
