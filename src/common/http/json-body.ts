import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';
import { findUnstorableText } from '../storable-text.js';

export const TOOL_CALL_BODY_LIMIT = 512 * 1024;
export const ADMIN_BODY_LIMIT = 64 * 1024;
export const MAX_JSON_DEPTH = 32;

// Case-insensitive, as Express routes: /V1/Runs/…/Tool-Calls reaches the same handler.
const TOOL_CALL_PATH = /^\/v1\/runs\/[^/]+\/tool-calls(:batch)?\/?$/i;

/** Charsets a UTF-8 reading gets right: UTF-8 itself and its ASCII subset. */
const UTF8_COMPATIBLE = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);
/** Content codings that compress (RFC 9110 §8.4.1 and the registry); anything else is read as it comes. */
const COMPRESSIONS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'compress', 'x-compress', 'zstd']);

/** A parameter of a media type's `; name=value` list (quoted values read whole, so a quoted ";charset=" is not one). */
function mediaTypeParameter(params: string, name: string): string | undefined {
  const re = /;\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g;
  for (let m = re.exec(params); m; m = re.exec(params)) {
    if (m[1].toLowerCase() !== name) continue;
    const value = m[2].trim();
    return value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
  }
  return undefined;
}

/** Deepest bracket nesting of a JSON text, ignoring brackets inside strings. Iterative: no stack to blow. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) max = Math.max(max, ++depth);
    else if (c === 125 || c === 93) depth--;
  }
  return max;
}

type BodyRequest = Request & { correlationId?: string; bodyError?: AppError };

/**
 * What was wrong with the body (415, 400), for the auth guard to throw once the
 * caller is authenticated and may call the route: the order of checks is
 * authenticate (401) → role (403) → the rest (API.md §9), so an anonymous
 * caller learns nothing from a body check. Only the size limit (413) answers at
 * once: it protects the reader, whoever sent the body.
 */
export function bodyErrorOf(req: Request): AppError | undefined {
  return (req as BodyRequest).bodyError;
}

/**
 * Our own JSON body reader (Nest's body parser is off): a per-route size limit
 * (413), a nesting limit, and problem+json for every failure. The limit is
 * enforced while reading, so an oversized body is never buffered whole.
 */
export function jsonBodyMiddleware(req: BodyRequest, res: Response, next: NextFunction): void {
  const method = req.method;
  if (method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS') return next();
  const toolCalls = TOOL_CALL_PATH.test(req.path);
  const limit = toolCalls ? TOOL_CALL_BODY_LIMIT : ADMIN_BODY_LIMIT;
  const cid = req.correlationId ?? 'unknown';
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) {
    req.resume();
    return sendProblem(res, new AppError('PAYLOAD_TOO_LARGE', `body exceeds ${limit} bytes`), cid);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let failed = false;
  req.on('data', (chunk: Buffer) => {
    if (failed) return;
    size += chunk.length;
    if (size > limit) {
      failed = true;
      sendProblem(res, new AppError('PAYLOAD_TOO_LARGE', `body exceeds ${limit} bytes`), cid);
      return;
    }
    chunks.push(chunk);
  });
  req.on('error', () => {
    failed = true;
  });
  req.on('end', () => {
    if (failed) return;
    const refuse = (error: AppError): void => {
      req.bodyError = error;
      next();
    };
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() === '') {
      (req as { body?: unknown }).body = undefined;
      return next();
    }
    const type = String(req.headers['content-type'] ?? '');
    // application/json or a +json type, nothing after it but parameters (application/json-seq is not JSON).
    const media = /^application\/(?:[a-z0-9.+-]*\+)?json\s*(;.*)?$/i.exec(type);
    if (!media) return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json'));
    // JSON is UTF-8 (RFC 8259 §8.1): the body is read as UTF-8, so another charset would be misread.
    const charset = mediaTypeParameter(media[1] ?? '', 'charset')?.toLowerCase();
    if (charset !== undefined && !UTF8_COMPATIBLE.has(charset)) {
      return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json in UTF-8'));
    }
    // A compressed body would be read as text and refused as "not JSON": say what is wrong instead.
    const codings = String(req.headers['content-encoding'] ?? '').toLowerCase().split(',').map((c) => c.trim());
    if (codings.some((c) => COMPRESSIONS.has(c))) {
      return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'Content-Encoding is not supported: send the body uncompressed'));
    }
    if (jsonDepth(text) > MAX_JSON_DEPTH) {
      return refuse(new AppError('BAD_REQUEST', `JSON nesting deeper than ${MAX_JSON_DEPTH}`));
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return refuse(new AppError('BAD_REQUEST', 'body is not valid JSON'));
    }
    // A number literal too big for a double (1e309, 400 digits) parses to ±Infinity, which no JSON
    // can carry on (JSON.stringify writes null) and the action digest refuses: refused here.
    if (hasNonFiniteNumber(body)) {
      return refuse(new AppError('BAD_REQUEST', 'a number in the body is too large to represent'));
    }
    // Only a \u escape can put NUL or an unpaired surrogate into parsed JSON. Tool calls
    // record the model's text repaired (redaction, storableText); everything else is refused.
    if (!toolCalls && text.includes('\\u') && findUnstorableText(body) !== undefined) {
      return refuse(new AppError('BAD_REQUEST', 'strings must not contain NUL characters or unpaired UTF-16 surrogates'));
    }
    (req as { body?: unknown }).body = body;
    next();
  });
}

/** True when a parsed JSON value holds ±Infinity anywhere (iterative: no recursion to blow). */
export function hasNonFiniteNumber(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const item of Object.values(v)) stack.push(item);
    }
  }
  return false;
}
