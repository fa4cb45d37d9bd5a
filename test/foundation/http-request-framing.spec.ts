/**
 * Requests framed in a way the gateway cannot read as the client meant, and bodies over the limit:
 * - RFC 9112 §6.1: an HTTP/1.0 request with any Transfer-Encoding has faulty framing: 400 problem+json, the
 *   connection closed after it, and nothing parsed behind it on that connection run (a front end framing the
 *   message otherwise would have read those bytes as its body, or as another client's request);
 * - RFC 9110 §15.5.14: after a 413 (a Content-Length over the limit, or the limit crossed mid-body) the connection is
 *   closed, the rest of the body not read on until the request timeout; the client still gets the 413 (no reset);
 * - RFC 9112 §3.2: a Host field whose value is not `uri-host [":" port]` is 400, as several Host fields are.
 */
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logSocketAnswer } from '../support/response-log.js';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';

/** Writes bytes, collects everything until the server closes (or 3 s). */
function raw(port: number, bytes: string): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const done = (closedByServer: boolean) => {
      clearTimeout(timer);
      logSocketAnswer(bytes, Buffer.concat(chunks)); // the run-wide leak scan reads it
      resolve({ text: Buffer.concat(chunks).toString('utf8'), closedByServer });
    };
    const timer = setTimeout(() => {
      s.destroy();
      done(false);
    }, 3_000);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => undefined);
    s.on('end', () => {
      s.destroy();
      done(true);
    });
    s.write(bytes);
  });
}

const answersIn = (text: string) => text.match(/HTTP\/1\.[01] \d{3} /g) ?? [];
const problemIn = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { status: number; code: string; correlationId: string };

describe('request framing and body limits', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp();
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });
  const orgsNamed = async (name: string) => ((await t.ds.query('SELECT count(*)::int AS n FROM orgs WHERE name = $1', [name])) as { n: number }[])[0].n;

  describe('RFC 9112 §6.1: an HTTP/1.0 request with Transfer-Encoding has faulty framing', () => {
    for (const coding of ['chunked', 'gzip, chunked']) {
      it(`Transfer-Encoding: ${coding} over HTTP/1.0 with keep-alive: 400 problem+json, Connection: close, closed; nothing behind it read or run`, async () => {
        const name = `te10-${coding.length}-${Date.now()}`;
        const behind = `te10-behind-${coding.length}-${Date.now()}`;
        const body = JSON.stringify({ name });
        const next = JSON.stringify({ name: behind });
        const { text, closedByServer } = await raw(
          port,
          `POST /v1/orgs HTTP/1.0\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\n` +
            `Transfer-Encoding: ${coding}\r\nConnection: keep-alive\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n` +
            // what a front end framing the message otherwise (HTTP/1.0 has no chunked) would take for another request
            `POST /v1/orgs HTTP/1.0\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${next.length}\r\nConnection: keep-alive\r\n\r\n${next}` +
            'GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n',
        );
        expect(answersIn(text), text.slice(0, 600)).toEqual(['HTTP/1.1 400 ']);
        expect(text).toMatch(/\r\nconnection: close\r\n/i);
        expect(text).toMatch(/\r\ncontent-type: application\/problem\+json/i);
        expect(problemIn(text)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
        expect(closedByServer).toBe(true);
        await new Promise((r) => setTimeout(r, 200));
        expect(await orgsNamed(name)).toBe(0);
        expect(await orgsNamed(behind)).toBe(0);
      });
    }

    it('HTTP/1.0 with a Content-Length, and HTTP/1.1 chunked, are still read', async () => {
      const name10 = `cl10-${Date.now()}`;
      const body10 = JSON.stringify({ name: name10 });
      const r10 = await raw(
        port,
        `POST /v1/orgs HTTP/1.0\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body10.length}\r\n\r\n${body10}`,
      );
      expect(answersIn(r10.text)).toEqual(['HTTP/1.1 201 ']);
      const name11 = `te11-${Date.now()}`;
      const body11 = JSON.stringify({ name: name11 });
      const r11 = await raw(
        port,
        `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\n` +
          `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body11.length.toString(16)}\r\n${body11}\r\n0\r\n\r\n`,
      );
      expect(answersIn(r11.text)).toEqual(['HTTP/1.1 201 ']);
      expect(await orgsNamed(name10)).toBe(1);
      expect(await orgsNamed(name11)).toBe(1);
    });
  });

  describe('RFC 9110 §15.5.14: a 413 closes the connection, the rest of the body not read', () => {
    /**
     * Sends the head, then body bytes as fast as the server takes them until it closes (at most 4 s); counts what
     * was taken in after the 413 arrived.
     */
    async function upload(head: string, chunked: boolean): Promise<{ answer: string; closed: boolean; afterAnswer: number }> {
      const s = connect(port, '127.0.0.1');
      let answer = '';
      let closed = false;
      let afterAnswer = 0;
      s.on('data', (c: Buffer) => {
        answer += c.toString('latin1');
      });
      s.on('close', () => {
        closed = true;
      });
      s.on('error', () => undefined);
      await new Promise<void>((r) => s.once('connect', () => r()));
      s.write(head);
      const piece = Buffer.alloc(64 * 1024, 0x20);
      const chunk = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
      const started = Date.now();
      while (!closed && Date.now() - started < 4_000) {
        if (answer.startsWith('HTTP/1.1 ')) afterAnswer += chunk.length;
        if (!s.write(chunk)) await new Promise((r) => { s.once('drain', r); setTimeout(r, 50); });
        else await new Promise((r) => setImmediate(r));
      }
      s.destroy();
      logSocketAnswer(head, answer);
      return { answer, closed, afterAnswer };
    }

    const cases: { name: string; head: string; chunked: boolean }[] = [
      { name: 'a declared Content-Length over the limit, anonymous', head: 'POST /v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n', chunked: false },
      { name: 'a declared Content-Length over the limit, with a key', head: `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n`, chunked: false },
      { name: 'a chunked body crossing the limit, with a key', head: `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`, chunked: true },
    ];
    for (const c of cases) {
      it(`${c.name}: 413 problem+json with Connection: close, then the connection closes (not read on until the request timeout)`, async () => {
        const { answer, closed, afterAnswer } = await upload(c.head, c.chunked);
        expect(answer).toMatch(/^HTTP\/1\.1 413 /);
        expect(answer).toMatch(/\r\nconnection: close\r\n/i);
        expect(answer).toMatch(/"code":"PAYLOAD_TOO_LARGE"/);
        expect(closed, `${Math.round(afterAnswer / 1048576)} MiB taken in after the 413, connection still open`).toBe(true);
        expect(afterAnswer, 'bytes taken in after the 413').toBeLessThan(32 * 1048576);
      }, 20_000);
    }

    // Found by a reviewer of routing edges: a GET's body was read and dropped to its end (a gigabyte in 3 s), anonymous
    // or not, on any GET route, bounded only by the request timeout.
    const gets: { name: string; head: string; status: string; chunked: boolean }[] = [
      { name: 'a GET declaring a 100 GB body, anonymous', head: 'GET /v1/tools HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n', status: '401', chunked: false },
      { name: 'a GET with a chunked body, with a key', head: `GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nTransfer-Encoding: chunked\r\n\r\n`, status: '200', chunked: true },
    ];
    for (const c of gets) {
      it(`${c.name}: answered (${c.status}) without its body read, with Connection: close, then the connection closes`, async () => {
        const { answer, closed, afterAnswer } = await upload(c.head, c.chunked);
        expect(answer.slice(0, 12)).toBe(`HTTP/1.1 ${c.status}`);
        expect(answer).toMatch(/\r\nconnection: close\r\n/i);
        expect(closed, `${Math.round(afterAnswer / 1048576)} MiB taken in after the answer, connection still open`).toBe(true);
        expect(afterAnswer, 'bytes taken in after the answer').toBeLessThan(32 * 1048576);
      }, 20_000);
    }
  });

  describe('RFC 9112 §3.2: a Host field with an invalid value is 400', () => {
    // "a, b" is what two Host fields look like once a proxy joins them.
    for (const host of ['a, b', 'x/y', 'a b', 'x:notaport', 'x:80:80', '[::1', '[not-ipv6]:80', 'x:-1']) {
      it(`Host: ${host} → 400 problem+json BAD_REQUEST, the connection closed`, async () => {
        const { text, closedByServer } = await raw(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        expect(text.slice(0, 200)).toMatch(/^HTTP\/1\.1 400 /);
        expect(problemIn(text)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
        expect(closedByServer).toBe(true);
      });
    }

    for (const host of ['localhost', 'api.example.com:8443', '127.0.0.1:3000', '[::1]:3000', '[2001:db8::1]', 'x:', '']) {
      it(`Host: "${host}" is read as before (200)`, async () => {
        const { text } = await raw(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        expect(text.slice(0, 200)).toMatch(/^HTTP\/1\.1 200 /);
      });
    }
  });
});
