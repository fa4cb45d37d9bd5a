/**
 * One GraphQL round trip to Shopify, with every way it can fail mapped to a
 * VendorOutcome kind (VENDORS.md §1.4-1.6). Messages are our own words: vendor
 * bodies can echo customer data and must not reach the ledger.
 */
import { clampRetryAfterMs, retryAfterMsOf, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, vendorRequest, VendorHttpError, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome, type FailedOutcome, type VendorEndpoints } from '../vendor-handler.js';

export type GraphqlResult =
  | {
      ok: true;
      data: Record<string, unknown>;
      vendorStatus: number;
      /** fields Shopify refused (ACCESS_DENIED: a scope the app lacks) and answered null, e.g. "order.customer" */
      denied?: string[];
    }
  | FailedOutcome;

const SAFE_CODE = /^[A-Za-z_]{1,40}$/;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export async function postShopifyGraphql(
  endpoints: VendorEndpoints,
  graphqlUrl: string,
  accessToken: string,
  query: string,
  variables: Record<string, unknown>,
  signal: AbortSignal,
  /** The mutation field this document runs, if any (see interpretShopifyResponse). */
  mutation?: string,
  /** Sees the headers of every HTTP answer (the API version Shopify served). */
  onHeaders?: (headers: Record<string, string>) => void,
): Promise<GraphqlResult> {
  let res: VendorHttpResponse;
  try {
    res = await vendorRequest({
      method: 'POST',
      url: graphqlUrl,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'user-agent': endpoints.userAgent,
        'x-shopify-access-token': accessToken,
      },
      body: JSON.stringify({ query, variables }),
      signal,
      timeoutMs: endpoints.timeoutMs,
      connectTimeoutMs: endpoints.connectTimeoutMs,
      maxResponseBytes: endpoints.maxResponseBytes,
      errorJudgedByStatus: true, // interpretShopifyResponse judges an error answer by its status (a 429's body only for its wait)
    });
  } catch (err) {
    if (err instanceof VendorHttpError) return httpErrorOutcome(err) as FailedOutcome;
    throw err;
  }
  onHeaders?.(res.headers);
  return interpretShopifyResponse(res, mutation);
}

/**
 * `mutation` names the mutation field of the document (refundCreate, orderUpdate). GraphQL answers
 * 200 with top-level `errors` and `data` possibly partial (VENDORS.md §1.4): when that field's payload
 * came back, the mutation ran — an error elsewhere in the answer does not undo it — so the payload
 * goes to the handler, which judges it, instead of the answer being called a failure.
 */
export function interpretShopifyResponse(res: VendorHttpResponse, mutation?: string): GraphqlResult {
  const status = res.status;
  const fail = (kind: FailedOutcome['kind'], message: string, retryAfterMs?: number): FailedOutcome => failedOutcome(kind, message, status, retryAfterMs);
  // An expired 24 h / 1 h token also answers 401 (VENDORS.md §1.4); 403 is a missing scope.
  if (status === 401 || status === 403) return fail('auth', `shopify refused the access token (HTTP ${status})`);
  // graphql.json itself is missing: the shop or the API version is wrong. An unknown order is data.order: null (VENDORS.md §1.4),
  // so "not found" here would tell the model that an order it may well have does not exist; and it is the org's
  // credentials an admin must fix (shopDomain, apiVersion), not the call's input: CREDENTIALS_INVALID.
  if (status === 404) return fail('auth', 'shopify answered 404 for its GraphQL endpoint: unknown shop or API version (check shopDomain and apiVersion)');
  if (status === 429) return withWait(fail('rate_limited', 'shopify rate limit reached (HTTP 429)'), shopify429WaitMs(res), SHOPIFY_DEFAULT_429_WAIT_MS);
  if (status === 402 || status === 423) return fail('rejected', `shopify shop is frozen or locked (HTTP ${status})`);
  if (status >= 500) return fail('server_error', `shopify server error (HTTP ${status})`, retryAfterMsOf(res.headers));
  if (status < 200 || status >= 300) return fail('rejected', `shopify refused the request (HTTP ${status})`);

  let body: unknown;
  try {
    body = res.json();
  } catch (err) {
    if (err instanceof VendorHttpError) return httpErrorOutcome(err) as FailedOutcome;
    throw err;
  }
  if (!isRecord(body)) return fail('bad_response', 'shopify answered with an unexpected body');
  // An empty list beside data is no error (Shopify leaves the field out; proxies and other GraphQL servers send []).
  const noErrors = body.errors === undefined || body.errors === null || (Array.isArray(body.errors) && body.errors.length === 0 && isRecord(body.data));
  if (!noErrors) {
    if (mutation !== undefined && isRecord(body.data) && isRecord(body.data[mutation])) return { ok: true, data: body.data, vendorStatus: status };
    const denied = mutation === undefined ? deniedFields(body.errors, body.data) : undefined;
    if (denied) return { ok: true, data: body.data as Record<string, unknown>, vendorStatus: status, denied };
    return graphqlErrorsOutcome(body.errors, body.extensions, status, mutation);
  }
  if (!isRecord(body.data)) return fail('bad_response', 'shopify answer carries no data');
  return { ok: true, data: body.data, vendorStatus: status };
}

const PATH_PART = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * A query answered with its root object but some fields inside it refused:
 * every error is ACCESS_DENIED on a path below a root field that came back
 * (e.g. ["order", "customer"] without read_customers). GraphQL nulls just
 * those fields, so the rest is still the answer; the paths say what is
 * missing. Anything else — another code, a refused root, a path we would
 * not print — is not this case (undefined).
 */
function deniedFields(errors: unknown, data: unknown): string[] | undefined {
  if (!Array.isArray(errors) || errors.length === 0 || !isRecord(data)) return undefined;
  const paths = new Set<string>(); // the vendor sizes the list: no includes() per entry
  for (const e of errors) {
    if (!isRecord(e) || !isRecord(e.extensions) || e.extensions.code !== 'ACCESS_DENIED' || !Array.isArray(e.path)) return undefined;
    const names = e.path.filter((p): p is string => typeof p === 'string');
    if (e.path.length < 2 || !names.every((p) => PATH_PART.test(p)) || !isRecord(data[String(e.path[0])])) return undefined;
    const path = names.join('.');
    paths.add(path);
  }
  return [...paths];
}

/** Shopify gives no wait for "in progress"; one second keeps the poll light. */
export const IN_PROGRESS_POLL_MS = 1_000;

/**
 * "This request is currently in progress" (IDEMPOTENCY_CONCURRENT_REQUEST): an
 * earlier request under the same @idempotent key is still running at Shopify.
 * Asking again with the same key is harmless and hands back its result once
 * it is done (VENDORS.md §1.9 point 6).
 */
export function idempotencyInProgress(status: number): FailedOutcome {
  return {
    ok: false,
    kind: 'in_progress',
    vendorStatus: status,
    requestSent: true,
    retryAfterMs: IN_PROGRESS_POLL_MS,
    message: 'shopify says an earlier attempt of this refund (same idempotency key) is still in progress',
  };
}

/**
 * "The same idempotency key cannot be used with different operation
 * parameters" (IDEMPOTENCY_KEY_PARAMETER_MISMATCH): an earlier attempt under
 * this key reached Shopify, so the refund may exist. Reconcile, never re-key:
 * a new key would be a second refund (VENDORS.md §1.9 point 6).
 */
export function idempotencyKeyConflict(status: number): FailedOutcome {
  return {
    ok: false,
    kind: 'key_conflict',
    vendorStatus: status,
    requestSent: true,
    message: 'shopify already has a refund attempt under this idempotency key, with other parameters: reconcile',
  };
}

function errorCode(e: Record<string, unknown>): string | undefined {
  const code = isRecord(e.extensions) ? e.extensions.code : undefined;
  return typeof code === 'string' && SAFE_CODE.test(code) ? code : undefined;
}

/**
 * A field error is raised while the document executes (GraphQL spec,
 * "Errors"), and its path starts at the response key of a root field:
 * "refundCreate" (the gateway's documents use no aliases). For a mutation, a
 * field error on it means its resolver ran, so it may have taken effect —
 * unless its code says otherwise: refused for access at the mutation itself,
 * or Shopify's internal error (a 5xx in kind, handled as one). Shopify's
 * validation errors (graphql-ruby) carry a path too, but one into the
 * document, starting at the operation ("mutation Refund"): not a run.
 */
function ranAndFailed(e: Record<string, unknown>, mutation: string): boolean {
  if (!onMutation(e, mutation)) return false;
  const code = errorCode(e);
  return !((e.path as unknown[]).length === 1 && (code === 'ACCESS_DENIED' || code === 'INTERNAL_SERVER_ERROR'));
}

function onMutation(e: Record<string, unknown>, mutation: string): boolean {
  return Array.isArray(e.path) && e.path[0] === mutation;
}

/** Codes that refuse the request as a whole, before it runs: its cost, the app's access, the shop (VENDORS.md §1.4). */
const BEFORE_EXECUTION_CODES = new Set(['THROTTLED', 'MAX_COST_EXCEEDED', 'ACCESS_DENIED', 'SHOP_INACTIVE']);

/** graphql-ruby names the operation by its type and name ("query OrderLookup", "query" when anonymous) at the head of a document path. */
const OPERATION_PATH_HEAD = /^(query|mutation|subscription)( [A-Za-z_][A-Za-z0-9_]*)?$/;

/**
 * An error positively raised before the document ran: parse and validation
 * errors point into the document (`locations`, which they always carry; a
 * validation error's path, if any, starts at the operation, never at a
 * response key), or a path-less code refuses the request as a whole. A
 * missing path proves nothing on its own: Shopify answers an execution that
 * timed out as 200 {"errors":[{"message":"Timeout"}]}. `mutation` names the
 * mutation field of the document, undefined for a query: a query's field
 * errors have a path from a root field's response key ("order"), not from the
 * operation.
 */
function beforeExecution(e: Record<string, unknown>, mutation: string | undefined): boolean {
  const pointsIntoDocument = Array.isArray(e.locations) && e.locations.length > 0;
  if (Array.isArray(e.path) && e.path.length > 0) {
    const intoDocument = mutation !== undefined ? !onMutation(e, mutation) : typeof e.path[0] === 'string' && OPERATION_PATH_HEAD.test(e.path[0]);
    return pointsIntoDocument && intoDocument;
  }
  const code = errorCode(e);
  return pointsIntoDocument || (code !== undefined && BEFORE_EXECUTION_CODES.has(code));
}

/**
 * Top-level `errors` with no usable payload. `mutation` names the mutation
 * field the document runs, if any: an error raised while it ran leaves its
 * outcome unknown — calling it refused would invite a retry under a new key,
 * a second refund. So does an error that cannot be placed before execution.
 * For a query, such an error (an execution "Timeout", a code-less internal
 * error) is Shopify failing on its side, a 5xx in kind: a read is asked again.
 */
function graphqlErrorsOutcome(errors: unknown, extensions: unknown, status: number, mutation?: string): FailedOutcome {
  const all = Array.isArray(errors) ? errors : [];
  const list = all.filter(isRecord);
  const codes = list.map(errorCode).filter((c): c is string => c !== undefined);
  const base = { ok: false as const, vendorStatus: status, requestSent: true };
  // The codes of the other @idempotent mutations (VENDORS.md §1.9); refundCreate may raise them at the top level too.
  if (codes.includes('IDEMPOTENCY_CONCURRENT_REQUEST')) return idempotencyInProgress(status);
  if (codes.includes('IDEMPOTENCY_KEY_PARAMETER_MISMATCH')) return idempotencyKeyConflict(status);
  // Without the cost extensions to compute the refill from, the same default wait as a 429 that names none: a retry
  // after the executor's bare jitter would meet a bucket that refills at 50-100 points a second. withWait marks it as
  // the gateway's own default, so it is not reported to the agent as the vendor's retryAfterSeconds.
  if (codes.includes('THROTTLED')) return withWait({ ...base, kind: 'rate_limited', message: 'shopify query cost limit reached (THROTTLED)' }, throttleWaitMs(extensions), SHOPIFY_DEFAULT_429_WAIT_MS);
  // A 2xx whose answer cannot tell what happened: for a write, the outcome is unknown (OUTCOME_UNKNOWN), never resent.
  if (mutation !== undefined && list.some((e) => ranAndFailed(e, mutation))) {
    return { ...base, kind: 'bad_response', message: `shopify reported an error while running ${mutation}: it may have taken effect` };
  }
  // The rest is a refusal only if every error is positively from before execution, ACCESS_DENIED on the mutation
  // itself, or INTERNAL_SERVER_ERROR (a 5xx in kind, handled as one): a path-less "Timeout" may come from a run,
  // and so may an error whose path neither starts at the mutation nor points into the document.
  const placed = (e: unknown, m: string) => isRecord(e) && (beforeExecution(e, m) || onMutation(e, m) || errorCode(e) === 'INTERNAL_SERVER_ERROR');
  if (mutation !== undefined && (all.length === 0 || !all.every((e) => placed(e, mutation)))) {
    // It may come from outside the executor (a request timed out while its run goes on), so the run may still be
    // going at Shopify. A cut-off or unusable answer, or a field error, came after the run.
    return { ...base, kind: 'bad_response', mayStillRun: true, message: `shopify answered ${mutation} with an error that does not say whether it ran: it may have taken effect` };
  }
  if (codes.includes('ACCESS_DENIED')) return { ...base, kind: 'auth', message: 'shopify denied access (ACCESS_DENIED: missing scope?)' };
  if (codes.includes('INTERNAL_SERVER_ERROR')) return { ...base, kind: 'server_error', message: 'shopify GraphQL internal error' };
  // A query is refused only by errors positively from before its run: one that may come from the run (a path-less
  // "Timeout", a code-less error, a field error under a response key) is Shopify's trouble, not the caller's input.
  const named = codes.length > 0 ? ` (${[...new Set(codes)].join(', ')})` : '';
  if (mutation === undefined && (all.length === 0 || !all.every((e) => isRecord(e) && beforeExecution(e, undefined)))) {
    return { ...base, kind: 'server_error', message: `shopify answered the query with an error not placed before its run${named}, such as its execution "Timeout": a failure on its side` };
  }
  return { ...base, kind: 'rejected', message: `shopify refused the GraphQL request${named}` };
}

/** Shopify's own client waits this long after a 429 that says nothing about when to come back (VENDORS.md §1.6). */
export const SHOPIFY_DEFAULT_429_WAIT_MS = 1_000;

/**
 * How long an HTTP 429 says to wait: its Retry-After; else, when the body is
 * GraphQL's THROTTLED (some shops answer it as 429, VENDORS.md §0), the cost
 * maths of its extensions; else nothing (the caller waits Shopify's client
 * default of 1 s, as its own guess).
 */
function shopify429WaitMs(res: VendorHttpResponse): number | undefined {
  const retryAfter = retryAfterMsOf(res.headers);
  if (retryAfter !== undefined) return retryAfter;
  let body: unknown;
  try {
    body = JSON.parse(res.text());
  } catch {
    return undefined;
  }
  return isRecord(body) ? throttleWaitMs(body.extensions) : undefined;
}

/** Wait until the bucket holds the requested cost again: (requested − available) / restoreRate seconds (VENDORS.md §1.6). */
export function throttleWaitMs(extensions: unknown): number | undefined {
  const cost = isRecord(extensions) ? extensions.cost : undefined;
  if (!isRecord(cost) || !isRecord(cost.throttleStatus)) return undefined;
  const requested = cost.requestedQueryCost;
  const { currentlyAvailable: available, restoreRate } = cost.throttleStatus;
  if (typeof requested !== 'number' || typeof available !== 'number' || typeof restoreRate !== 'number') return undefined;
  if (!Number.isFinite(requested) || !Number.isFinite(available) || !(restoreRate > 0)) return undefined;
  // A tiny restoreRate would make it huge (or Infinity): at most a day, as any Retry-After.
  return clampRetryAfterMs(Math.max(0, Math.ceil(((requested - available) / restoreRate) * 1000)));
}
