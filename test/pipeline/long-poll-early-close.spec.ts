import http from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { ToolCallResultsService } from '../../src/tool-calls/tool-call-results.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * The controller listens for the client going away (res 'close', socket 'end') only once the handler runs. A client
 * that went away earlier — while the guard looked its key up, say — was never heard: the long-poll waited its whole
 * waitMs for nobody, reading the call again when it settled. A FIN cannot be told from a client that half-closes
 * once its request is sent: that one is answered at once too, with the call as it is (README).
 */
describe('a long-poll whose client went away before the handler ran', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A call waiting for an expert: nothing settles it during the test. */
  async function waitingCall(): Promise<{ id: string; agentKey: string }> {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const post = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    expect(post.status).toBe(202);
    return { id: post.body.toolCallId as string, agentKey: org.agentKey };
  }

  /** The key lookup takes a moment (a busy database): the client goes away meanwhile. */
  function slowKeyLookup(): void {
    const keys = h.t.app.get(ApiKeysService);
    const realAuth = keys.authenticate.bind(keys);
    vi.spyOn(keys, 'authenticate').mockImplementation(async (...args: Parameters<typeof keys.authenticate>) => {
      await sleep(300);
      return realAuth(...args);
    });
  }

  const port = (): number => ((h.t.app.getHttpServer() as http.Server).address() as AddressInfo).port;

  it.each([
    ['reset', (req: http.ClientRequest) => req.socket!.resetAndDestroy()],
    ['closed (a FIN: an HTTP client giving up)', (req: http.ClientRequest) => req.destroy()],
  ])('does not wait out its waitMs for a client whose connection was %s', async (_how, goAway) => {
    const call = await waitingCall();
    slowKeyLookup();
    const svc = h.t.app.get(ToolCallResultsService);
    const realGet = svc.get.bind(svc);
    let handled: Promise<unknown> | undefined;
    let handledAt = 0;
    vi.spyOn(svc, 'get').mockImplementation((...args: Parameters<typeof svc.get>) => {
      const p = realGet(...args);
      handled = p.then(() => (handledAt = Date.now()), () => (handledAt = Date.now()));
      return p;
    });

    const req = http.get({ host: '127.0.0.1', port: port(), path: `/v1/tool-calls/${call.id}/result?waitMs=8000`, headers: bearer(call.agentKey) });
    req.on('error', () => undefined);
    await sleep(50);
    const closedAt = Date.now();
    goAway(req); // before the guard has let the request in

    const until = Date.now() + 3_000;
    while (!handled && Date.now() < until) await sleep(10);
    expect(handled).toBeDefined(); // the handler did run (the request had been dispatched)
    await Promise.race([handled, sleep(2_000)]);
    // Answered (to nobody) at once; it used to wait the full 8 s, a waiter on the call all along.
    expect(svc.waitingOn(call.id)).toBe(0);
    expect(handledAt).toBeGreaterThan(0);
    expect(handledAt - closedAt).toBeLessThan(1_500);
  });

  it.each([
    ['at once', false],
    ['while the guard looks its key up', true],
  ])('a client that half-closes once its request is sent, its FIN read %s, is answered at once with the call as it is', async (_when, slow) => {
    const call = await waitingCall();
    if (slow) slowKeyLookup();
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port(), '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      socket.end(`GET /v1/tool-calls/${call.id}/result?waitMs=8000 HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer(call.agentKey).Authorization}\r\n\r\n`);
    });
    expect(Date.now() - started).toBeLessThan(4_000); // not the 8 s asked for
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ toolCallId: call.id, status: 'waiting_approval' });
    expect(h.t.app.get(ToolCallResultsService).waitingOn(call.id)).toBe(0);
  });
});
