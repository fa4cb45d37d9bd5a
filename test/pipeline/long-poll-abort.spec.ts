import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ToolCallResultsService } from '../../src/tool-calls/tool-call-results.service.js';
import { within } from '../support/gateway-process.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/** GET …/result?waitMs= is looked for in the database every 200 ms; a client that went away must stop that at once. */
describe('the result long-poll stops when the client goes away', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await h?.close();
  });

  it('no more row loads, no timer or listener left, the handler returns, once the socket is destroyed mid-poll', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const post = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    expect(post.status).toBe(202); // waits for an expert: the long-poll has nothing to wake it but its own polling
    const id = post.body.toolCallId as string;

    // Count the reads of this call: its own row loads (SELECT … WHERE t.id = $1) and the shared look-ups naming it.
    const sql = h.t.app.get(Sql);
    const realQuery = sql.query.bind(sql);
    let loads = 0;
    let lookups = 0;
    vi.spyOn(sql, 'query').mockImplementation(((text: string, params?: unknown[]) => {
      if (Array.isArray(params) && params[0] === id && /FROM tool_calls t WHERE t\.id = \$1/.test(text)) loads++;
      if (Array.isArray(params) && Array.isArray(params[0]) && (params[0] as unknown[]).includes(id) && /id = ANY\(\$1::uuid\[\]\)/.test(text)) lookups++;
      return realQuery(text, params);
    }) as typeof sql.query);
    // And when the handler is done with the request.
    const svc = h.t.app.get(ToolCallResultsService);
    const realGet = svc.get.bind(svc);
    let handled: Promise<unknown> | undefined;
    vi.spyOn(svc, 'get').mockImplementation((...args: Parameters<typeof svc.get>) => {
      const p = realGet(...args);
      handled = p.catch(() => undefined);
      return p;
    });

    const { port } = (h.t.app.getHttpServer() as http.Server).address() as AddressInfo;
    const req = http.get({ host: '127.0.0.1', port, path: `/v1/tool-calls/${id}/result?waitMs=20000`, headers: bearer(org.agentKey) });
    req.on('error', () => undefined); // the socket is destroyed on purpose
    const deadline = Date.now() + 5000;
    while (lookups < 3 && Date.now() < deadline) await sleep(20);
    expect(lookups).toBeGreaterThanOrEqual(3); // it is polling: the shared look-up names the call every 200 ms
    expect(loads).toBe(1); // its own row read once, when it came: the look-up says when to read it again
    expect(svc.waitingOn(id)).toBe(1);

    req.destroy();
    // The handler returns once the server has seen the close (a load under way then is awaited first); with the
    // close ignored it would keep waiting for the whole 20 s.
    await within(handled!, 5_000, 'the handler to return');
    expect(svc.waitingOn(id)).toBe(0);
    await sleep(300); // a look-up already under way at the close may still name it
    const atClose = lookups + loads;
    await sleep(1_000); // five more polls, had anything kept going
    expect(lookups + loads - atClose).toBe(0);
  });

  it('a long-poll whose client stays still answers when the call settles or the wait ends', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const post = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    const started = Date.now();
    const res = await h.t.http.get(`/v1/tool-calls/${post.body.toolCallId}/result?waitMs=600`).set(bearer(org.agentKey));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'waiting_approval' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });
});
