import type { Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ToolCallResultsService } from '../../src/tool-calls/tool-call-results.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * Agents waiting for approvals long-poll GET …/result?waitMs=30000 (README). Open long-polls cost one look-up
 * statement per 200 ms between them, not a read each: a few thousand used to fill the pool (five reads a second
 * each) until every other request waited for a connection and answered 503.
 */
describe('many open long-polls', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await h?.close();
  });

  it('200 long-polls on 20 calls cost a look-up per tick, not a read each; a decision not announced here still wakes them all', async () => {
    const rules = [{ id: 'gate', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: 'gate' }];
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: String(1000 + i) }));
      expect(posted.status).toBe(202);
      ids.push(posted.body.toolCallId as string);
    }

    const results = h.t.app.get(ToolCallResultsService);
    const polls = ids.flatMap((id) => Array.from({ length: 10 }, () => h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=30000`).set(bearer(org.agentKey)).then((r) => r)));
    await waitFor(() => results.waitingOn() === 200, 'the 200 long-polls to be waiting', 15_000);

    // Statements while they wait.
    const sql = h.t.app.get(Sql);
    const realQuery = sql.query.bind(sql);
    let statements = 0;
    const spy = vi.spyOn(sql, 'query').mockImplementation(((text: string, params?: unknown[]) => {
      statements++;
      return realQuery(text, params);
    }) as typeof sql.query);
    await new Promise((r) => setTimeout(r, 1_000));
    spy.mockRestore();
    // Five look-ups a second (fewer when each runs late: the next comes 200 ms after one ends, and the other test worker
    // may slow them); a read per long-poll per tick would be 1,000.
    expect(statements).toBeGreaterThanOrEqual(1);
    expect(statements).toBeLessThanOrEqual(10);

    // Rejected: the approval settles the calls without this process announcing them to the long-polls; the
    // shared look-up finds them settled and every long-poll answers, long before its 30 s. Timed from the last decision:
    // the 20 decisions' own round trips took 13 s with the database slowed (the wake-up itself some 10 ms).
    const ops = bearer((await createKey(h.t, org.orgId, 'ops')).key);
    for (const id of ids) {
      const approval = (await h.t.http.get(`/v1/tool-calls/${id}`).set(ops)).body.approval as { id: string; actionDigest: string };
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest });
      expect(decided.status).toBe(200);
    }
    const decidedAt = Date.now();
    const answers = await Promise.all(polls);
    expect(Date.now() - decidedAt).toBeLessThan(5_000);
    expect(answers.map((a) => [a.status, a.body.status, a.body.errorCode])).toEqual(answers.map(() => [200, 'blocked', 'EXPERT_REJECTED']));
    expect(results.waitingOn()).toBe(0);
  }, 60_000);

  it('16 long-polls pipelined on one connection: no MaxListenersExceededWarning, and the client\'s FIN ends them all', async () => {
    // A listener each on the socket's 'end' put 11+ on one connection (HTTP_PIPELINE_DEPTH lets 64 be dispatched at
    // once), and Node printed "Possible EventEmitter memory leak detected": a false alarm, one per connection.
    const rules = [{ id: 'gate', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: 'gate' }];
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '4242' }));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    const socket = connect(((h.t.app.getHttpServer() as Server).address() as { port: number }).port, '127.0.0.1');
    try {
      let received = '';
      socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
      await new Promise<void>((r) => socket.once('connect', () => r()));
      const poll = `GET /v1/tool-calls/${id}/result?waitMs=20000 HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer(org.agentKey).Authorization}\r\n\r\n`;
      socket.write(poll.repeat(16));
      const results = h.t.app.get(ToolCallResultsService);
      await waitFor(() => results.waitingOn(id) === 16, 'the 16 pipelined long-polls to be waiting', 10_000);
      const started = Date.now();
      socket.end(); // the FIN: every wait on the connection ends, answering what it has (the call still waits for its approval)
      await waitFor(() => (received.match(/HTTP\/1\.1 200 OK/g) ?? []).length === 16, 'the 16 answers', 10_000);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect((received.match(/"status":"waiting_approval"/g) ?? []).length).toBe(16);
      expect(results.waitingOn(id)).toBe(0);
      await new Promise((r) => setImmediate(r)); // a warning is emitted on the next tick
      expect(warnings.filter((w) => w.includes('MaxListenersExceeded'))).toEqual([]);
    } finally {
      socket.destroy();
      process.off('warning', onWarning);
      await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({});
    }
  }, 30_000);

  // Found by a reviewer of cancellation: a response queued behind another has no socket yet, so no 'close' of its own,
  // and a reset brings no FIN: those long-polls waited out waitMs, then read (and charged for) a result for nobody.
  it('long-polls pipelined on a connection that is reset (RST, no FIN) all stop waiting at once, and read nothing more', async () => {
    const rules = [{ id: 'gate', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: 'gate' }];
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '4242' }));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;

    const sql = h.t.app.get(Sql);
    const realQuery = sql.query.bind(sql);
    let loads = 0;
    const spy = vi.spyOn(sql, 'query').mockImplementation(((text: string, params?: unknown[]) => {
      if (Array.isArray(params) && params[0] === id && /FROM tool_calls t WHERE t\.id = \$1/.test(text)) loads++;
      return realQuery(text, params);
    }) as typeof sql.query);

    const socket = connect(((h.t.app.getHttpServer() as Server).address() as { port: number }).port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((r) => socket.once('connect', () => r()));
    const poll = `GET /v1/tool-calls/${id}/result?waitMs=20000 HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer(org.agentKey).Authorization}\r\n\r\n`;
    socket.write(poll.repeat(3));
    const results = h.t.app.get(ToolCallResultsService);
    await waitFor(() => results.waitingOn(id) === 3, 'the 3 pipelined long-polls to be waiting', 10_000);
    const loadsBefore = loads;

    socket.resetAndDestroy(); // RST, no FIN
    const started = Date.now();
    while (Date.now() - started < 3_000 && results.waitingOn(id) > 0) await new Promise((r) => setTimeout(r, 50));
    const leftWaiting = results.waitingOn(id);

    // The run is cancelled (the call blocked): whatever still waits wakes and reads the row for nobody.
    await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({});
    await new Promise((r) => setTimeout(r, 1_000));
    const ghostLoads = loads - loadsBefore;

    spy.mockRestore();
    expect({ leftWaiting, ghostLoads }).toEqual({ leftWaiting: 0, ghostLoads: 0 });
  }, 30_000);
});
