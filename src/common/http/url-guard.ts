import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';
import { canonicalUuid } from '../ids.js';

const ENCODED_NUL = /%00/;

/**
 * A NUL byte can reach us only percent-encoded (the HTTP parser refuses a raw
 * one), and no id, filter or path segment of this API may contain one:
 * PostgreSQL text cannot hold it, so a filter value with NUL would fail the
 * query (500) instead of matching nothing. Refused here for every route.
 */
export function nulInUrlGuard(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  if (ENCODED_NUL.test(req.url)) return sendProblem(res, new AppError('BAD_REQUEST', 'the URL must not contain NUL (%00)'), req.correlationId ?? 'unknown');
  // A request target has no fragment (RFC 9112 §3.2), but Node's parser lets one through: the router would drop it
  // after the id canonicalisation below had read it as part of the last segment (an upper-case id left as sent).
  if (req.url.includes('#')) {
    return sendProblem(res, new AppError('BAD_REQUEST', 'the URL must not contain "#" (a fragment is not sent in a request; send a literal "#" as %23)'), req.correlationId ?? 'unknown');
  }
  // The router's URL parser (parseurl: Node's legacy url.parse for an absolute-form target, `PUT http://host/v1\orgs\…`)
  // reads "\" as "/", but the id canonicalisation below splits on "/" only: an org id reached the handlers in upper
  // case, and credentials stored so were sealed to it and unusable by every call. No path of this API has a "\".
  if (pathOf(req.url).includes('\\')) {
    return sendProblem(res, new AppError('BAD_REQUEST', 'the URL path must not contain "\\" (send a literal one as %5C)'), req.correlationId ?? 'unknown');
  }
  if (hasMalformedPathEscape(req.url)) {
    return sendProblem(res, new AppError('BAD_REQUEST', 'the URL path holds a malformed percent-escape (a "%" not followed by two hex digits, or bytes that are not UTF-8): send a literal "%" as %25'), req.correlationId ?? 'unknown');
  }
  next();
}

/**
 * The router percent-decodes path parameters and answers a bare "Bad request"
 * for one it cannot decode (`/v1/orgs/%ZZ`, half a UTF-8 sequence); said here
 * instead. The path is not echoed: a caller's URL is not ours to repeat.
 */
function hasMalformedPathEscape(url: string): boolean {
  const path = pathOf(url);
  if (!path.includes('%')) return false;
  try {
    decodeURIComponent(path);
    return false;
  } catch {
    return true;
  }
}

/** The request target without its query. */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A path segment that is a UUID once percent-decoded, in its canonical spelling; undefined otherwise. */
function canonicalUuidSegment(segment: string): string | undefined {
  let decoded = segment;
  if (segment.includes('%')) {
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return undefined; // malformed escapes: the router answers them
    }
  }
  return UUID.test(decoded) ? canonicalUuid(decoded) : undefined;
}

/**
 * Path ids in their canonical (lower-case, unescaped) spelling before routing,
 * so `/v1/orgs/5F0C…/…`, `/v1/orgs/%35F0C…/…` and `/v1/orgs/5f0c…/…` are one
 * resource everywhere — including the credentials' associated data, which is
 * bound to the org id as text. A segment counts once percent-decoded, as the
 * router will decode it. Only whole UUID segments of the path change; the
 * query string is left alone (its id filters are canonicalised by their DTOs,
 * and free-text filters such as correlationId are matched exactly).
 */
export function canonicalIdsInPath(req: Request, _res: Response, next: NextFunction): void {
  const q = req.url.indexOf('?');
  const path = q === -1 ? req.url : req.url.slice(0, q);
  if (/[A-F%]/.test(path)) {
    const canonical = path
      .split('/')
      .map((segment) => canonicalUuidSegment(segment) ?? segment)
      .join('/');
    if (canonical !== path) req.url = canonical + (q === -1 ? '' : req.url.slice(q));
  }
  next();
}
