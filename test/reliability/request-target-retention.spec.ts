import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunsService } from '../../src/runs/runs.service.js';
import { setupOrg, toolUse } from '../support/scenario.js';
import { bearer, startTestApp, type TestApp } from '../support/test-app.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heap = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/** One raw request; resolves with the status line. */
function rawPost(port: number, target: string, headers: Record<string, string>, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => {
      const head = Object.entries({ Host: 'gw.local', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), Connection: 'close', ...headers })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      s.write(`POST ${target} HTTP/1.1\r\n${head}\r\n${body}`);
    });
    let d = '';
    s.on('data', (c: Buffer) => (d += c.toString('latin1')));
    s.on('error', reject);
    s.on('close', () => resolve(d.split('\r\n')[0]));
  });
}

/**
 * Found by a review of in-process memory bounds. RunsService.snapshots (up to 50,000 active runs) is keyed by the :runId path parameter as the router cut it out of
 * req.url. V8 keeps such a cut (>= 13 chars) as a view into the whole request target: with an absolute-form target
 * (`POST http://user:<pad>@host/v1/runs/<id>/tool-calls`, which routes) every cached run holds its first request's
 * whole URL alive, up to HTTP_MAX_HEADER_BYTES: 50,000 x 16 KiB = 800 MB by default, 3.2 GB at 64 KiB. Each entry
 * should cost what the snapshot itself holds (a few hundred bytes).
 */
describe('memory: run snapshot cache retains request URLs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(); // HTTP_MAX_HEADER_BYTES at its default, 16 KiB
  });
  afterAll(async () => {
    await t?.close();
  });

  it('each cached run snapshot costs well under 2 KB of heap, whatever URL its first call came with', async () => {
    const RUNS = 150;
    const org = await setupOrg(t, { tools: ['order_lookup.lookup'], vendors: [] });
    const runIds: string[] = [org.runId];
    while (runIds.length < RUNS) {
      const r = await t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' });
      expect(r.status).toBe(201);
      runIds.push((r.body as { id: string }).id);
    }
    const port = ((t.app.getHttpServer() as Server).address() as AddressInfo).port;
    const snapshots = (t.app.get(RunsService) as unknown as { snapshots: Map<string, unknown> }).snapshots;
    snapshots.clear();
    const pad = 'a'.repeat(15_000); // the request line stays under the default 16 KiB
    const statuses = new Set<string>();
    for (const runId of runIds) {
      const body = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
      statuses.add(await rawPost(port, `http://u:${pad}@gw.local/v1/runs/${runId}/tool-calls`, { Authorization: `Bearer ${org.agentKey}` }, body));
    }
    expect(snapshots.size).toBe(RUNS); // every run's call reached RunsService.snapshot (answered: ${statuses})
    const withCache = heap();
    const keep = [...snapshots.entries()].map(([k, v]) => [k.split('').join(''), v] as const); // the same entries, own-copy keys
    snapshots.clear();
    for (const [k, v] of keep) snapshots.set(k, v);
    const withCopies = heap();
    const retainedPerRun = (withCache - withCopies) / RUNS;
    expect(retainedPerRun, `${Math.round(retainedPerRun)} B per run held by the cache's keys beyond copies of their own (answered: ${[...statuses].join(' | ')})`).toBeLessThan(2_000);
  }, 120_000);
});
