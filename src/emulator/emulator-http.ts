/**
 * Wire helpers of the vendor emulator: turning node:http requests into
 * EmuRequests and EmuResponses into bytes, plus the canned bodies the
 * vendor-neutral faults answer with.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { EmuRequest, EmuResponse, FaultSpec } from './emulator.types.js';

export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function toEmuRequest(req: IncomingMessage, rawBody: Buffer): EmuRequest {
  const rawUrl = req.url ?? '/';
  const q = rawUrl.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const emu: EmuRequest = {
    method: req.method ?? 'GET',
    path: q === -1 ? rawUrl : rawUrl.slice(0, q),
    query: new URLSearchParams(q === -1 ? '' : rawUrl.slice(q + 1)),
    headers,
    rawBody,
  };
  const type = headers['content-type'] ?? '';
  if (rawBody.length > 0 && type.includes('json')) {
    try {
      emu.json = JSON.parse(rawBody.toString('utf8')) as unknown;
    } catch {
      // left undefined: the vendor module answers a malformed body its own way
    }
  } else if (type.includes('application/x-www-form-urlencoded')) {
    emu.form = new URLSearchParams(rawBody.toString('utf8'));
  }
  return emu;
}

/** Writes the answer; false when the client had already gone away. */
export function writeResponse(res: ServerResponse, answer: EmuResponse): boolean {
  if (res.destroyed || res.writableEnded) return false;
  const { headers, payload } = encodeResponse(answer);
  res.writeHead(answer.status, headers);
  res.end(payload);
  return true;
}

/**
 * `answer`'s status, headers (its whole Content-Length) and the first half of its body, then the connection closed
 * (`close`) or nothing more sent until the client gives up (`stall`): an answer cut off on the way.
 */
export function writeCutResponse(res: ServerResponse, answer: EmuResponse, then: 'close' | 'stall'): void {
  if (res.destroyed || res.writableEnded) return;
  const { headers, payload } = encodeResponse(answer);
  res.writeHead(answer.status, headers);
  res.write(payload.subarray(0, Math.floor(payload.length / 2)), () => {
    if (then === 'close') res.socket?.destroy();
  });
}

function encodeResponse(answer: EmuResponse): { headers: Record<string, string>; payload: Buffer } {
  let payload: Buffer;
  let type: string | undefined;
  const body = answer.body;
  if (body === undefined) payload = Buffer.alloc(0);
  else if (Buffer.isBuffer(body)) {
    payload = body;
    type = 'application/octet-stream';
  } else if (typeof body === 'string') {
    payload = Buffer.from(body, 'utf8');
    type = 'text/plain; charset=utf-8';
  } else {
    payload = Buffer.from(JSON.stringify(body), 'utf8');
    type = 'application/json; charset=utf-8';
  }
  const headers: Record<string, string> = {};
  if (type) headers['content-type'] = type;
  if (answer.headers) for (const [k, v] of Object.entries(answer.headers)) headers[k.toLowerCase()] = v;
  headers['content-length'] = String(payload.length);
  return { headers, payload };
}

export function notFoundResponse(): EmuResponse {
  return { status: 404, body: { error: 'no emulated vendor serves this path' } };
}

/** Fallback for vendors that do not shape their own fault answers. */
export function genericFaultResponse(fault: FaultSpec): EmuResponse {
  const status = fault.kind === 'throttled' ? 429 : (fault.status ?? 500);
  const headers: Record<string, string> = status === 429 ? { 'retry-after': '1' } : {};
  return { status, headers: { ...headers, ...fault.headers }, body: fault.body ?? { error: STATUS_CODES[status] ?? 'Error' } };
}

export function malformedResponse(): EmuResponse {
  // Cut off mid-object, as a proxy that dropped the tail of the answer would.
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{"data": {"order": {"id": "gid://shopify/Order/1", "name": ' };
}

/**
 * The vendor's own answer with the tail of its body lost, still labelled JSON.
 * A strict prefix of a JSON object or array is never valid JSON: its closing
 * bracket is the last character.
 */
export function truncatedResponse(answer: EmuResponse): EmuResponse {
  const body = answer.body;
  const text = body === undefined ? '{}' : Buffer.isBuffer(body) ? body.toString('utf8') : typeof body === 'string' ? body : JSON.stringify(body);
  return {
    status: answer.status,
    headers: { ...answer.headers, 'content-type': 'application/json; charset=utf-8' },
    body: text.slice(0, Math.max(1, Math.floor(text.length / 2))),
  };
}

const hugeBodies = new Map<number, Buffer>();

/** A valid JSON document of exactly `sizeBytes` bytes (cached: the default is 6 MB). */
export function hugeResponse(sizeBytes = 6 * 1024 * 1024): EmuResponse {
  let body = hugeBodies.get(sizeBytes);
  if (!body) {
    const head = '{"data":{"padding":"';
    const tail = '"}}';
    body = Buffer.from(head + 'x'.repeat(Math.max(0, sizeBytes - head.length - tail.length)) + tail, 'utf8');
    hugeBodies.set(sizeBytes, body);
  }
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body };
}
