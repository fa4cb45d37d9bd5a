import { connect } from 'node:net';
import { TEST_ADMIN_KEY } from '../support/secrets.js';

export type Kind =
  | 'healthz'
  | 'listOrgs'
  | 'postOrg'
  | 'post401'
  | 'oversized'
  | 'badHost'
  | 'unparseable'
  | 'headersTooLarge'
  | 'http10te'
  | 'connClose'
  | 'expect100'
  | 'expect417'
  | 'postChunked'
  | 'badJson'
  | 'getConnClose';

export interface Req {
  kind: Kind;
  /** org name for the org-creating kinds (and the refused ones: must never be created) */
  name?: string;
  bytes: Buffer;
  /** the final status it must get when reached */
  status: number;
  /** its answer closes the connection */
  closes: boolean;
}

const AUTH = `Authorization: Bearer ${TEST_ADMIN_KEY}\r\n`;

export const ctx = { orgId: '00000000-0000-0000-0000-000000000000' };

export function build(kind: Kind, name: string): Req {
  const body = JSON.stringify({ name });
  const json = `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  switch (kind) {
    case 'healthz':
      return { kind, bytes: Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'), status: 200, closes: false };
    case 'listOrgs':
      return { kind, bytes: Buffer.from(`GET /v1/orgs/${ctx.orgId} HTTP/1.1\r\nHost: x\r\n${AUTH}\r\n`), status: 200, closes: false };
    case 'postOrg':
      return { kind, name, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${AUTH}${json}\r\n${body}`), status: 201, closes: false };
    case 'post401':
      return { kind, name, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${json}\r\n${body}`), status: 401, closes: true };
    case 'oversized': {
      const big = Buffer.alloc(70_000, 0x20);
      Buffer.from(body).copy(big);
      return {
        kind,
        name,
        bytes: Buffer.concat([Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${AUTH}Content-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`), big]),
        status: 413,
        closes: true,
      };
    }
    case 'badHost':
      return { kind, bytes: Buffer.from(`GET /v1/orgs HTTP/1.1\r\nHost: x/y\r\n${AUTH}\r\n`), status: 400, closes: true };
    case 'unparseable':
      return { kind, bytes: Buffer.from('GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'), status: 400, closes: true };
    case 'headersTooLarge':
      return { kind, bytes: Buffer.from(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`), status: 431, closes: true };
    case 'http10te': {
      const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
      return {
        kind,
        name,
        bytes: Buffer.from(`POST /v1/orgs HTTP/1.0\r\nHost: x\r\n${AUTH}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`),
        status: 400,
        closes: true,
      };
    }
    case 'connClose':
      return { kind, name, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${AUTH}${json}\r\n${body}`), status: 201, closes: true };
    case 'postChunked': {
      const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
      return { kind, name, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${AUTH}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`), status: 201, closes: false };
    }
    case 'badJson':
      return { kind, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${AUTH}Content-Type: application/json\r\nContent-Length: 5\r\n\r\n{"na:`), status: 400, closes: false };
    case 'getConnClose':
      return { kind, bytes: Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), status: 200, closes: true };
    case 'expect417':
      return { kind, bytes: Buffer.from(`GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n`), status: 417, closes: true };
    case 'expect100':
      return { kind, name, bytes: Buffer.from(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n${AUTH}${json}\r\n${body}`), status: 201, closes: false };
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** ms since the start when its last byte arrived */
  at: number;
}

/** Parses whole responses off `buf`; interim 1xx answers are skipped. Returns the answers and whether bytes were left over. */
export function parseAnswers(buf: Buffer, times: { end: number; at: number }[]): { answers: Answer[]; rest: number; garbage?: string } {
  const answers: Answer[] = [];
  let off = 0;
  const timeAt = (pos: number): number => times.find((t) => t.end >= pos)?.at ?? -1;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', off);
    if (headEnd < 0) break;
    const head = buf.subarray(off, headEnd).toString('latin1');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
    if (!m) return { answers, rest: buf.length - off, garbage: head.slice(0, 200) };
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const line of head.split('\r\n').slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let p = headEnd + 4;
    if (status >= 100 && status < 200) {
      off = p;
      continue;
    }
    let body: Buffer;
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = [];
      let done = false;
      for (;;) {
        const le = buf.indexOf('\r\n', p);
        if (le < 0) break;
        const size = parseInt(buf.subarray(p, le).toString('latin1'), 16);
        if (size === 0) {
          const te = buf.indexOf('\r\n', le + 2);
          if (te < 0) break;
          p = te + 2;
          done = true;
          break;
        }
        if (buf.length < le + 2 + size + 2) break;
        parts.push(buf.subarray(le + 2, le + 2 + size));
        p = le + 2 + size + 2;
      }
      if (!done) break;
      body = Buffer.concat(parts);
    } else {
      const len = Number(headers['content-length'] ?? 0);
      if (buf.length < p + len) break;
      body = buf.subarray(p, p + len);
      p += len;
    }
    answers.push({ status, headers, body: body.toString('utf8'), at: timeAt(p) });
    off = p;
  }
  return { answers, rest: buf.length - off };
}

export interface Exchange {
  wire: Buffer;
  answers: Answer[];
  closedAt?: number;
  endAt?: number;
  elapsed: number;
  garbage?: string;
  rest: number;
  /** answer to the final GET /healthz sent when nothing should have closed the connection */
  final?: Answer;
  writeErrors: number;
}

/**
 * Sends `chunks` (with `delays` ms before each but the first) on one connection. When `expectOpenAfter` answers arrive
 * and the socket is still open, sends a final GET /healthz and waits for it. Gives up after `boundMs`.
 */
export function exchange(port: number, chunks: Buffer[], delays: number[], expectOpenAfter: number | undefined, boundMs = 5_000): Promise<Exchange> {
  return new Promise((resolve) => {
    const start = performance.now();
    const now = (): number => performance.now() - start;
    const s = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    const times: { end: number; at: number }[] = [];
    let size = 0;
    let closedAt: number | undefined;
    let endAt: number | undefined;
    let finalSent = false;
    let finalIndex = -1;
    let writeErrors = 0;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const wire = Buffer.concat(got);
      const parsed = parseAnswers(wire, times);
      const answers = parsed.answers;
      const final = finalSent && answers.length > finalIndex ? answers[finalIndex] : undefined;
      resolve({ wire, answers: finalSent ? answers.slice(0, finalIndex) : answers, closedAt, endAt, elapsed: now(), garbage: parsed.garbage, rest: parsed.rest, final, writeErrors });
    };
    const timer = setTimeout(finish, boundMs);
    s.on('error', () => {
      writeErrors++;
    });
    s.on('end', () => {
      endAt = now();
    });
    s.on('close', () => {
      closedAt = now();
      finish();
    });
    s.on('data', (c: Buffer) => {
      got.push(c);
      size += c.length;
      times.push({ end: size, at: now() });
      if (expectOpenAfter === undefined) return;
      const { answers } = parseAnswers(Buffer.concat(got), times);
      if (!finalSent && answers.length >= expectOpenAfter && s.writable) {
        finalSent = true;
        finalIndex = answers.length;
        s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      } else if (finalSent && answers.length > finalIndex) {
        finish();
      }
    });
    s.on('connect', () => {
      void (async () => {
        for (let i = 0; i < chunks.length; i++) {
          if (i > 0 && delays[i] > 0) await new Promise((r) => setTimeout(r, delays[i]));
          if (!s.writable || done) return;
          s.write(chunks[i]);
        }
      })();
    });
  });
}

/** Splits `all` at the given fractional positions. */
export function split(all: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => Math.floor(c * all.length)).filter((p) => p > 0 && p < all.length))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(all.subarray(prev, p));
    prev = p;
  }
  out.push(all.subarray(prev));
  return out;
}

export function show(wire: Buffer, max = 1_500): string {
  return JSON.stringify(wire.subarray(0, max).toString('latin1').split(TEST_ADMIN_KEY).join('<ADMIN_KEY>').replace(/ {40,}/g, (m) => `<${m.length} spaces>`).replace(/a{200,}/g, (m) => `<${m.length} a>`));
}
