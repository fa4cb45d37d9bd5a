import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET, SHOPIFY_REFRESH_TOKEN } from '../support/secrets.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, setupNangoOrg } from './support.js';

const THRESHOLD = 3;
const COOLDOWN_MS = 30_000;

interface LogLine {
  level: number;
  msg?: string;
  [k: string]: unknown;
}

/**
 * What the on-call sees when a vendor or the gateway's own database fails: the request log shows a 200 for every
 * tool result, so the lines and metrics here are the only signals that name the org, the vendor and the call.
 */
describe('signals an operator acts on', () => {
  let h: Harness;
  let direct: pg.Client;
  beforeAll(async () => {
    h = await startHarness({
      CIRCUIT_BREAKER_THRESHOLD: String(THRESHOLD),
      CIRCUIT_BREAKER_COOLDOWN_MS: String(COOLDOWN_MS),
      VENDOR_MAX_RETRIES: '0',
      VENDOR_TIMEOUT_MS: '1500',
      DB_QUERY_TIMEOUT_MS: '2000',
    });
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await direct?.end();
    await h?.close();
  });

  const linesSince = (from: number): LogLine[] =>
    h.t.logs.slice(from).flatMap((l) => {
      try {
        return [JSON.parse(l) as LogLine];
      } catch {
        return [];
      }
    });
  async function scrape(): Promise<Map<string, number>> {
    const m = new Map<string, number>();
    for (const line of ((await h.t.http.get('/metrics')).text as string).split('\n')) {
      if (!line || line.startsWith('#')) continue;
      const i = line.lastIndexOf(' ');
      m.set(line.slice(0, i), Number(line.slice(i + 1)));
    }
    return m;
  }
  const breakerSeries = async (): Promise<Record<string, number>> =>
    Object.fromEntries([...(await scrape())].filter(([k]) => k.startsWith('vendor_circuit_breaker_open{')));
  const lookup = (org: OrgSetup) => call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });

  it('a breaker opening is a warn line naming the org, the vendor and the cause; the probe closing it is logged; the gauge shows only breakers not closed', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await lookup(org)).body.status).toBe('succeeded');
    // Healthy calls leave a closed breaker, which is no series: an alert on any value above 0 is an alert on trouble.
    expect(Object.values(await breakerSeries()).filter((v) => v > 0)).toEqual([]);

    const from = h.t.logs.length;
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, times: Infinity });
    const codes: string[] = [];
    for (let i = 0; i < THRESHOLD + 1; i++) codes.push((await lookup(org)).body.errorCode as string);
    expect(codes).toEqual([...Array<string>(THRESHOLD).fill('VENDOR_ERROR'), 'CIRCUIT_OPEN']);
    const opened = linesSince(from).filter((l) => l.msg?.startsWith('circuit breaker opened'));
    expect(opened).toHaveLength(1); // once, when it opened: not per refused call
    expect(opened[0]).toMatchObject({ level: 40, orgId: org.orgId, vendor: 'shopify', cause: 'server_error', vendorStatus: 500, cooldownMs: COOLDOWN_MS });
    expect(await breakerSeries()).toMatchObject({ 'vendor_circuit_breaker_open{vendor="shopify",state="open"}': 1 });

    h.emu.clearFaults();
    h.t.app.get(Clock).advance(COOLDOWN_MS);
    // Past its cooldown with no call yet it refuses nothing (the next call is its probe): not trouble, not reported.
    // An org that stops calling would otherwise keep the series up for as long as the process lives.
    expect(Object.values(await breakerSeries()).filter((v) => v > 0)).toEqual([]);
    const closedFrom = h.t.logs.length;
    expect((await lookup(org)).body.status).toBe('succeeded');
    expect(linesSince(closedFrom).filter((l) => l.msg?.startsWith('circuit breaker closed'))).toMatchObject([{ level: 30, orgId: org.orgId, vendor: 'shopify' }]);
    expect(Object.values(await breakerSeries()).filter((v) => v > 0)).toEqual([]);
  });

  it('a write that ends indeterminate is a warn line naming the call, its org and tool', async () => {
    const org = await setupNangoOrg(h.t);
    const from = h.t.logs.length;
    h.emu.fault({ vendor: 'nango', kind: 'delay', delayMs: 2_500, times: 1 });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: '/crm/contacts', body: { a: 1 } });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    const named = linesSince(from).filter((l) => l.msg?.startsWith('write outcome unknown'));
    expect(named).toMatchObject([{ level: 40, toolCallId: res.body.toolCallId, orgId: org.orgId, vendor: 'nango', tool: 'nango_proxy', action: 'post', cause: 'timeout' }]);
  });

  it('credentials this replica cannot decrypt: CREDENTIALS_INVALID, and a warn line that says it is the master key, not the vendor', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    // As a wrong MASTER_ENCRYPTION_KEY reads every row (the tag does not verify), before any call has cached them.
    await h.t.ds.query(`UPDATE integration_credentials SET auth_tag = decode(repeat('00', 16), 'hex') WHERE org_id = $1`, [org.orgId]);
    const sent = h.emu.requests.length;
    const from = h.t.logs.length;
    const res = await lookup(org);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect(h.emu.requests.length - sent).toBe(0);
    const lines = linesSince(from).filter((l) => l.msg?.startsWith('stored credentials could not be decrypted'));
    expect(lines).toMatchObject([{ level: 40, toolCallId: res.body.toolCallId, orgId: org.orgId, vendor: 'shopify' }]);
    expect(lines[0].msg).toMatch(/MASTER_ENCRYPTION_KEY/);
  });

  it("the gateway's own database failing before the request left (the token store timing out) is EXECUTION_ERROR, not the vendor's: no vendor sample, nothing sent", async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
      .set(bearer(org.adminKey))
      .send({ config: { shopDomain: 'acme-emulator.myshopify.com', clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET, refreshToken: SHOPIFY_REFRESH_TOKEN } });
    expect(put.status).toBe(200);
    const vendorSamples = async (): Promise<number> =>
      [...(await scrape())].filter(([k]) => k.startsWith('vendor_call_duration_seconds_count{vendor="shopify"')).reduce((n, [, v]) => n + v, 0);
    const samples = await vendorSamples();
    const sent = h.emu.requests.length;
    const from = h.t.logs.length;
    await direct.query('BEGIN');
    await direct.query('LOCK TABLE vendor_tokens IN ACCESS EXCLUSIVE MODE'); // the store's statements time out
    let res;
    try {
      res = await lookup(org);
    } finally {
      await direct.query('ROLLBACK');
    }
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR', toolResult: { is_error: true } });
    expect(res.body.toolResult.content).toMatch(/temporary problem on its side; nothing was sent to the vendor\. It may work later, as a new tool call/);
    expect(h.emu.requests.length - sent).toBe(0);
    expect(await vendorSamples()).toBe(samples);
    // The warn line says why: the statement timeout behind the lock, as a code and our phrase.
    expect(linesSince(from).filter((l) => l.msg === 'token store failed')).toMatchObject([{ level: 40, orgId: org.orgId, code: '57014' }]);
    // And it passes: the next call gets its token and goes through.
    expect((await lookup(org)).body.status).toBe('succeeded');
  });
});

describe('a retry stopped by the gateway\'s own database', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '4000' }); // retries on (VENDOR_MAX_RETRIES' default)
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a retry the gateway\'s own database stopped, after an attempt the vendor answered, is reported by that answer, not as "nothing was sent"', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'Retry-After': '0.1' }, bodyMatch: /refundCreate/, times: 1 });
    let leases = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (text.startsWith('INSERT INTO shopify_refund_leases') && ++leases === 2) throw connectionLost(); // the retry's lease
      return send();
    });
    const from = h.emu.requests.length;
    let res;
    try {
      res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    } finally {
      undo();
    }
    expect(leases).toBe(2);
    expect(h.emu.requests.slice(from).filter((r) => /refundCreate/.test(r.body))).toHaveLength(1); // the 429'd attempt only
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(res.body.toolResult.content).not.toMatch(/nothing was sent/);
  });
});
