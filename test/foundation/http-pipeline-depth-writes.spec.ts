import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * HTTP_PIPELINE_DEPTH: a client that pipelines more requests than that without reading its answers is cut off. The
 * connection was destroyed at once, and the requests within the depth whose bodies were still being read went on to
 * run, their answers lost with it (pipelining property test: five POST /v1/orgs in one write at depth 3 made orgs and
 * answered none): a client told only "connection reset" sends them again, and each runs twice. Now the connection
 * reads no more: the requests within the depth run and are answered, the rest are never run, then it closes.
 */
describe('a pipeline deeper than HTTP_PIPELINE_DEPTH, sent in one write', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp({ HTTP_PIPELINE_DEPTH: '3' });
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    (t?.app.getHttpServer() as Server | undefined)?.closeAllConnections();
    await t?.close();
  });

  it('answers every write it runs and runs none past the depth, then closes the connection', async () => {
    const base = `flood-${Date.now()}`;
    const post = (name: string): string => {
      const body = JSON.stringify({ name });
      return `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    };
    const { wire, closed } = await new Promise<{ wire: string; closed: boolean }>((resolve) => {
      const s = connect(port, '127.0.0.1');
      let got = '';
      const timer = setTimeout(() => {
        s.destroy();
        resolve({ wire: got, closed: false });
      }, 3_000);
      s.on('data', (c: Buffer) => (got += c.toString('latin1')));
      s.on('error', () => undefined);
      s.on('close', () => {
        clearTimeout(timer);
        resolve({ wire: got, closed: true });
      });
      s.write([0, 1, 2, 3, 4].map((i) => post(`${base}-${i}`)).join(''));
    });
    await new Promise((r) => setTimeout(r, 300));
    const rows = (await t.ds.query('SELECT name FROM orgs WHERE name LIKE $1 ORDER BY name', [`${base}-%`])) as { name: string }[];
    expect(wire.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 201', 'HTTP/1.1 201']);
    expect(rows.map((r) => r.name)).toEqual([0, 1, 2].map((i) => `${base}-${i}`));
    expect(closed).toBe(true);
  });
});
