import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type ShopifyEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg, toolUse, type OrgSetup } from '../support/scenario.js';
import { bearer, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * A write answered with a status line no HTTP class covers ("HTTP/1.1 000", "099": Node's parser hands statusCode 0 /
 * 99 on) after the vendor applied it. The answer is neither a success nor a refusal: the call is indeterminate /
 * OUTCOME_UNKNOWN, never failed with vendor_refused (which invites a second refund under a new tool_use), and the
 * refund keeps the order's lease (no other refund of the order overlaps it until reconciled or expired).
 */
let emu: VendorEmulator;
let t: TestApp;
let front: http.Server;
let org: OrgSetup;
let statusLine = 'HTTP/1.1 000 Unknown';
let applied = 0;
let refundsSent = 0;

beforeAll(async () => {
  emu = createFullEmulator();
  await emu.start();
  const target = new URL(emu.url);
  // In front of the emulator: a write is forwarded (and applied), and its answer goes back under the mangled status line.
  front = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const refund = body.toString().includes('refundCreate');
      if (refund) refundsSent++;
      const isWrite = (req.method === 'POST' && /\/proxy\//.test(req.url ?? '')) || refund;
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        if (!isWrite) {
          res.writeHead(ur.statusCode!, ur.headers);
          ur.pipe(res);
          return;
        }
        const got: Buffer[] = [];
        ur.on('data', (c: Buffer) => got.push(c));
        ur.on('end', () => {
          applied++;
          const b = Buffer.concat(got);
          res.socket!.end(`${statusLine}\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\nConnection: close\r\n\r\n${b.toString()}`);
        });
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  t = await startTestApp({ ...emulatorEnv(url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500' });
  org = await setupOrg(t, {
    tools: ['nango_proxy.post', 'shopify_refund.create'],
    vendors: ['shopify', 'nango'],
    rules: [
      { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
      { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
    ],
  });
});
afterAll(async () => {
  await t?.close();
  front?.closeAllConnections();
  await new Promise<void>((r) => (front ? front.close(() => r()) : r()));
  await emu?.stop();
});

const send = (name: string, input: Record<string, unknown>) => t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse(name, input));
const rowOf = async (id: string) => ((await t.ds.query('SELECT status, error_code, vendor_refused FROM tool_calls WHERE id = $1', [id])) as Record<string, unknown>[])[0];

describe('a write answered with a status no HTTP class covers is of unknown outcome', () => {
  for (const line of ['HTTP/1.1 000 Unknown', 'HTTP/1.1 099 Odd']) {
    it(`nango_proxy.post (${line}): indeterminate / OUTCOME_UNKNOWN, not "refused"`, async () => {
      statusLine = line;
      const before = applied;
      const r = await send('nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'hi' } });
      expect(applied - before).toBe(1); // the upstream had it
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
      expect(await rowOf(r.body.toolCallId)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    });
  }

  it('shopify_refund.create (HTTP/1.1 000): indeterminate / OUTCOME_UNKNOWN, and the order stays leased: a second refund is not sent', async () => {
    statusLine = 'HTTP/1.1 000 Unknown';
    const shop = emu.vendor<ShopifyEmulator>('shopify');
    const refunds = shop.refundCount(12345);
    const r = await send('shopify_refund', { action: 'create', orderId: '12345', amount: '1.50' });
    expect(shop.refundCount(12345) - refunds).toBe(1); // Shopify made the refund
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(await rowOf(r.body.toolCallId)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    // The refund may still be running (nothing placed the answer): the next refund of the order waits, and is not sent.
    const sent = refundsSent;
    const again = await send('shopify_refund', { action: 'create', orderId: '12345', amount: '1.50' });
    expect(again.body.status, JSON.stringify(again.body)).toBe('failed');
    expect(refundsSent - sent).toBe(0);
    expect(shop.refundCount(12345) - refunds).toBe(1);
  });
});
