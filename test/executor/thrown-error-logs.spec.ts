import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { captureLogs } from '../../src/logging/logging.js';
import { VendorRegistry } from '../../src/vendors/vendor-registry.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { SHOPIFY_TOKEN } from '../support/secrets.js';
import { call, rowOf } from './support.js';

/**
 * A handler that throws: the executor logs the error, and an error's message is not our own text. Node's
 * JSON.parse quotes the body it failed on, a URL in a message carries its query. The log keeps the error
 * (class, redacted message), never the token in it. The throw is injected (every handler parses vendor
 * bodies under a try/catch that maps to a failed outcome, so no vendor answer makes one throw).
 */
describe('an exception in a tool handler is logged without the secrets its message carries', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    await h?.close();
  });

  /** Runs one order lookup whose Shopify handler throws `makeError()`; the log lines written meanwhile. */
  async function lookupThatThrows(makeError: () => Error): Promise<{ lines: string[]; body: Record<string, unknown> }> {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const shopify = h.t.app.get(VendorRegistry).get('shopify');
    vi.spyOn(shopify, 'execute').mockImplementation(() => Promise.reject(makeError()));
    const { lines, stop } = captureLogs();
    try {
      const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
      expect(res.status).toBe(200);
      return { lines: [...lines], body: res.body as Record<string, unknown> };
    } finally {
      stop();
    }
  }

  it('a JSON.parse error on a vendor body echoing the token: not even the fragment JSON.parse quotes is logged', async () => {
    const { lines, body } = await lookupThatThrows(() => {
      try {
        JSON.parse(`{"access_token": ${SHOPIFY_TOKEN}}`);
      } catch (err) {
        return err as Error;
      }
      return new Error('unreachable: the body is not JSON');
    });
    expect(body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
    const threw = lines.filter((l) => l.includes('tool execution threw'));
    expect(threw).toHaveLength(1);
    const all = lines.join('\n');
    expect(all).not.toContain('shpat_');
    expect(all).not.toContain(SHOPIFY_TOKEN.slice(6, 12));
    // Still useful: which call, and what kind of error.
    expect(threw[0]).toContain(body.toolCallId as string);
    expect(threw[0]).toContain('SyntaxError');
    expect(JSON.stringify(await rowOf(h, body.toolCallId as string))).not.toContain('shpat_');
  });

  it('the line holds the stack (README: "its stack is in the line"), whose call it was and the correlation id the agent was answered with', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const shopify = h.t.app.get(VendorRegistry).get('shopify');
    vi.spyOn(shopify, 'execute').mockImplementation(() => Promise.reject(new TypeError("Cannot read properties of undefined (reading 'edges')")));
    const { lines, stop } = captureLogs();
    try {
      const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
      await new Promise((r) => setTimeout(r, 50));
      const threw = lines
        .flatMap((c) => c.split('\n'))
        .filter((l) => l.includes('tool execution threw'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(threw).toHaveLength(1);
      expect(threw[0]).toMatchObject({
        toolCallId: res.body.toolCallId,
        orgId: org.orgId,
        correlationId: res.headers['x-correlation-id'],
        vendor: 'shopify',
        tool: 'order_lookup',
        action: 'lookup',
        err: { name: 'TypeError', message: expect.stringContaining("reading 'edges'") },
      });
      expect((threw[0].err as { stack?: string }).stack).toMatch(/\n\s+at /);
    } finally {
      stop();
    }
  });

  it('an error naming a URL with ?access_token=: the log keeps the URL, the token is redacted', async () => {
    const { lines, body } = await lookupThatThrows(() => new Error(`request to https://shop.example/admin/api/orders.json?access_token=${SHOPIFY_TOKEN}&limit=1 failed`));
    expect(body).toMatchObject({ status: 'failed', errorCode: 'EXECUTION_ERROR' });
    const threw = lines.filter((l) => l.includes('tool execution threw'));
    expect(threw).toHaveLength(1);
    expect(threw[0]).toContain('https://shop.example/admin/api/orders.json?access_token=');
    expect(lines.join('\n')).not.toContain(SHOPIFY_TOKEN);
  });
});
