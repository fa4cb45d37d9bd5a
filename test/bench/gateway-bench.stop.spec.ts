import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runLoad, stopCurrentLoad } from '../../bench/gateway-bench.load.js';

/**
 * Ctrl-C (stopCurrentLoad) during a load: what ran must not come back as a
 * sample, or main() would write a partial run over the results. Its own file:
 * stopCurrentLoad refuses every later load of the module.
 */
let server: http.Server;
let url: string;
beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

it('rejects a soak-shaped load stopped after 1 s, and any load after it', async () => {
  const target = { key: 'allowed' as const, label: 'allowed', url, path: '/', headers: {}, expectedStatus: 200, body: '{}', bodyOk: () => true };
  const pids = { gateway: process.pid, emulator: process.pid, postgres: async (): Promise<number[]> => [] };
  let answered = 0;
  server.on('request', () => answered++);
  const stopper = setTimeout(stopCurrentLoad, 1000);
  // 1,000 calls at 100/s: 10 s if nothing stops it
  const started = performance.now();
  await expect(runLoad(target, { connections: 2, amount: 1000, overallRate: 100 }, pids)).rejects.toThrow('load stopped');
  clearTimeout(stopper);
  expect(performance.now() - started).toBeLessThan(5_000);
  expect(answered).toBeGreaterThan(0); // it was stopped mid-run, not refused up front
  await expect(runLoad(target, { connections: 1, duration: 1 }, pids)).rejects.toThrow('load stopped');
}, 20_000);
