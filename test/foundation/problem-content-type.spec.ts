import net from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * One media type spelling for every problem: those answered inside Express say "application/problem+json;
 * charset=utf-8", and the ones bootstrap.ts writes outside it (answerAndClose: 417 on an Expect it cannot meet;
 * endWithProblem: 400 for an unparsable request, 431) said it bare.
 */
describe('problem+json Content-Type on refusals written outside Express', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp();
    port = ((t.app.getHttpServer() as Server).address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The raw answer to `request`, sent on a connection of its own (the gateway closes it after these refusals). */
  const raw = (request: string): Promise<string> =>
    new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.write(request));
      let out = '';
      const timer = setTimeout(() => s.destroy(), 3_000);
      s.on('data', (d: Buffer) => (out += d.toString('latin1')));
      s.on('close', () => {
        clearTimeout(timer);
        resolve(out);
      });
      s.on('error', () => undefined);
    });
  const contentType = (answer: string): string | undefined => /\r\ncontent-type: ([^\r]*)/i.exec(answer)?.[1];

  it('431, 400 (unparsable) and 417 say charset=utf-8, as a 404 does', async () => {
    const inBand = contentType(await raw('GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    expect(inBand).toBe('application/problem+json; charset=utf-8');
    const answers = {
      431: await raw(`GET /v1/orgs HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`),
      400: await raw('POST /v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
      417: await raw('POST /v1/orgs HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\n{}'),
    };
    expect(Object.fromEntries(Object.entries(answers).map(([status, a]) => [status, [a.slice(9, 12), contentType(a)]]))).toEqual({
      431: ['431', inBand],
      400: ['400', inBand],
      417: ['417', inBand],
    });
  });
});
