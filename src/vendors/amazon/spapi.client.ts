/**
 * One tool call's conversation with SP-API: LWA token from the shared cache,
 * the request, and the single refresh-and-retry the vendor contract allows.
 * SP-API signals a bad token with 403 `Unauthorized`, not 401; a 401 (from an
 * edge in front of it, or should SP-API start sending one) refuses the token
 * just as plainly and is read the same way. A cached token refused may have
 * been revoked early, so it earns one refresh; a token fetched for this very
 * request earns one only when the answer says "expired" - a revoked or
 * malformed fresh token would fail again (VENDORS.md §2.3, §2.5).
 *
 * A 429 carries no Retry-After and no rate header: the wait handed to the
 * executor is 1/rate seconds, the rate being the last `x-amzn-RateLimit-Limit`
 * this seller and app saw for the operation, else the documented usage plan.
 */
import { TokenCache, type CredentialsCheck } from '../auth/token-cache.js';
import { retryAfterMsOf, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome, type FailedOutcome, type VendorEndpoints, type VendorFailureKind } from '../vendor-handler.js';
import { spapiBaseUrl, type AmazonCredentials } from './amazon.credentials.js';
import { isObject, type JsonObject } from './amazon.normalise.js';
import { fetchLwaToken, lwaCacheKey } from './lwa.client.js';

/**
 * SP-API operations the gateway calls, each with its own token bucket (VENDORS.md §2.2):
 * Orders v0 getOrder and getOrderItems, and Orders v2026-01-01 getOrder (`getOrder2026`).
 */
export type SpapiOperation = 'getOrder' | 'getOrderItems' | 'getOrder2026';

interface OperationSpec {
  /** the documented usage plan's rate (requests/s), used until a response tells the live one */
  rate: number;
  /** the top-level key every 2xx answer of the operation carries */
  envelope: string;
}

const OPERATIONS: Record<SpapiOperation, OperationSpec> = {
  // ordersV0.json: 0.5 requests/s, burst 30; every answer wrapped in `payload`.
  getOrder: { rate: 0.5, envelope: 'payload' },
  getOrderItems: { rate: 0.5, envelope: 'payload' },
  // orders_2026-01-01.json getOrder: 0.5 requests/s, burst 30; no wrapper, GetOrderResponse is `{order}`.
  getOrder2026: { rate: 0.5, envelope: 'order' },
};
const RATE = /^\d{1,6}(\.\d{1,6})?$/;

/** `x-amzn-RateLimit-Limit` as requests/s, or undefined when absent or not a sane positive number. */
export function parseRateLimit(value: string | undefined): number | undefined {
  if (value === undefined || !RATE.test(value.trim())) return undefined;
  const rate = Number(value.trim());
  return rate > 0 && rate <= 10_000 ? rate : undefined;
}

/** The shortest wait before the bucket has a token again: 1/rate s, rounded up to the ms. */
export function quotaBackoffMs(rate: number): number {
  return Math.ceil(1000 / rate);
}

/**
 * The live rate per (seller authorisation + app + region, operation), as
 * SP-API last reported it. Bounded: the oldest entry goes first.
 */
export class SpapiRates {
  private readonly rates = new Map<string, number>();

  constructor(private readonly maxEntries = 10_000) {}

  rateFor(sellerKey: string, op: SpapiOperation): number {
    return this.rates.get(`${sellerKey}|${op}`) ?? OPERATIONS[op].rate;
  }

  observe(sellerKey: string, op: SpapiOperation, rate: number | undefined): void {
    if (rate === undefined) return;
    const key = `${sellerKey}|${op}`;
    this.rates.delete(key); // re-insert: Map order is age order for eviction
    this.rates.set(key, rate);
    if (this.rates.size > this.maxEntries) {
      const oldest = this.rates.keys().next().value;
      if (oldest !== undefined) this.rates.delete(oldest);
    }
  }
}

/** ok: a 2xx JSON object that has the operation's envelope: Orders v0 `payload` (§2.2), v2026-01-01 `order`. */
export type SpapiAnswer = { ok: true; status: number; body: JsonObject } | { ok: false; outcome: FailedOutcome };

// SP-API error codes are CamelCase words; anything else stays out of messages.
const SAFE_CODE = /^[A-Za-z]{1,40}$/;

interface SpapiError {
  code?: string;
  expired: boolean;
}

const NO_ERROR: SpapiError = { expired: false };

// API Gateway has been seen to answer 403 with an empty body and only
// `x-amzn-ErrorType: MissingAuthenticationTokenException` (amzn/selling-partner-api-models#749).
const MISSING_TOKEN_TYPE = /^MissingAuthenticationToken/;

/**
 * The wait an SP-API 429 (QuotaExceeded, no Retry-After: VENDORS.md §2.3, §2.5) asks of a caller that does not know the
 * operation (Nango's proxy hands it back as it came, §4.2): 1/rate at the `x-amzn-RateLimit-Limit` sent, else at
 * getOrder's documented rate (2 s). Undefined for an answer that is not SP-API's.
 */
export function spapiQuotaWaitMs(res: VendorHttpResponse): number | undefined {
  const rate = parseRateLimit(res.headers['x-amzn-ratelimit-limit']);
  if (rate !== undefined) return quotaBackoffMs(rate);
  return readError(res).code === 'QuotaExceeded' ? quotaBackoffMs(OPERATIONS.getOrder.rate) : undefined;
}

/**
 * Whether an answer is SP-API's refusal of the caller's access token (a 403 whose code ERROR_KIND reads as `auth`:
 * `Unauthorized`, the token missing, expired, revoked or without the role), for a caller that does not hold the token
 * itself (Nango's proxy adds it and hands the answer back as it came, §4.2): the credentials' problem, as an upstream
 * 401 is. Not `MissingAuthenticationToken`: API Gateway's answer for a path it does not route, the request's own.
 */
export function spapiRefusedToken(res: VendorHttpResponse): boolean {
  return res.status === 403 && ERROR_KIND.get(readError(res).code ?? '') === 'auth';
}

function readError(res: VendorHttpResponse): SpapiError {
  let body: unknown;
  try {
    body = JSON.parse(res.text());
  } catch {
    // not JSON, or empty: the body names no error
  }
  const err = errorOf(body);
  if (err.code === undefined && MISSING_TOKEN_TYPE.test(res.headers['x-amzn-errortype'] ?? '')) {
    return { code: 'MissingAuthenticationToken', expired: false };
  }
  return err;
}

function errorOf(body: unknown): SpapiError {
  const first: unknown = isObject(body) && Array.isArray(body.errors) ? body.errors[0] : undefined;
  if (!isObject(first)) return { expired: false };
  const code = typeof first.code === 'string' && SAFE_CODE.test(first.code) ? first.code : undefined;
  const text = `${typeof first.message === 'string' ? first.message : ''} ${typeof first.details === 'string' ? first.details : ''}`;
  return { code, expired: code === 'Unauthorized' && saysTokenExpired(text) };
}

/**
 * "access token" and, later on the same line, "expired", in any case: the match amz-tools/amazon-sp-api uses
 * (/access token.*expired/i), in linear time. The regex backtracks to the line's end from every "access token":
 * a vendor message repeating it held the event loop for seconds.
 */
export function saysTokenExpired(text: string): boolean {
  for (const line of text.toLowerCase().split(/[\n\r\u2028\u2029]/)) {
    const at = line.indexOf('access token');
    if (at !== -1 && line.includes('expired', at + 'access token'.length)) return true;
  }
  return false;
}

function failed(kind: VendorFailureKind, status: number, message: string, retryAfterMs?: number): SpapiAnswer {
  return { ok: false, outcome: failedOutcome(kind, message, status, retryAfterMs) };
}

/**
 * The 1/rate wait is the gateway's reckoning from the usage plan, not a wait this answer named: it is slept
 * on, not reported as the vendor's (see retryAfterIsDefault in vendor-handler.ts).
 */
function quotaExceeded(status: number, message: string, namedMs: number | undefined, quotaWaitMs: number): SpapiAnswer {
  return { ok: false, outcome: withWait(failedOutcome('rate_limited', message, status), namedMs, quotaWaitMs) };
}

/** SP-API error codes (VENDORS.md §2.3) and what they mean wherever they come. */
const ERROR_KIND = new Map<string, VendorFailureKind>([
  ['InvalidInput', 'rejected'],
  ['Unauthorized', 'auth'],
  // API Gateway's answer for a path it does not route (VENDORS.md §2.3): the gateway's configuration, not the credentials.
  ['MissingAuthenticationToken', 'rejected'],
  ['NotFound', 'not_found'],
  ['QuotaExceeded', 'rate_limited'],
  ['InternalFailure', 'server_error'],
  ['ServiceUnavailable', 'server_error'],
]);

/**
 * A 2xx without the envelope the operation answers in (v0 `payload`, v2026
 * `order`) says nothing about the resource (only `{"payload":{}}` is the
 * not-found quirk, §2.3): it goes by the error it carries, if SP-API named
 * one, else it is unusable.
 */
function withoutEnvelope(status: number, envelope: string, code: string | undefined, quotaWaitMs: number): SpapiAnswer {
  const kind = code === undefined ? undefined : ERROR_KIND.get(code);
  const named = code ? ` (${code})` : '';
  const what = envelope === 'payload' ? 'a payload' : `"${envelope}"`;
  if (kind === undefined) return failed('bad_response', status, `SP-API answered HTTP ${status} without ${what}${named}`);
  const message = `SP-API answered HTTP ${status} with an error instead of ${what}${named}`;
  return kind === 'rate_limited' ? quotaExceeded(status, message, undefined, quotaWaitMs) : failed(kind, status, message);
}

function classify(res: VendorHttpResponse, err: SpapiError, envelope: string, quotaWaitMs: number): SpapiAnswer {
  const s = res.status;
  const code = err.code ? ` (${err.code})` : '';
  if (s >= 200 && s < 300) {
    let body: unknown;
    try {
      body = res.json();
    } catch (e) {
      if (e instanceof VendorHttpError) return { ok: false, outcome: httpErrorOutcome(e) as FailedOutcome };
      throw e;
    }
    if (!isObject(body)) return failed('bad_response', s, 'SP-API answered with an unexpected body');
    if (body[envelope] === undefined) return withoutEnvelope(s, envelope, errorOf(body).code, quotaWaitMs);
    return { ok: true, status: s, body };
  }
  if (s === 403 && err.code === 'MissingAuthenticationToken') {
    return failed('rejected', s, `SP-API does not route this request (HTTP 403${code}): a wrong host or path, check AMAZON_SPAPI_BASE_URL and the region`);
  }
  if (s === 403 || s === 401) return failed('auth', s, `SP-API refused the access token: HTTP ${s}${code}`);
  if (s === 404) return failed('not_found', s, `SP-API: not found${code}`);
  // SP-API sends no Retry-After on 429 [obs]; honour one only if something in between adds it.
  if (s === 429) return quotaExceeded(s, `SP-API quota exceeded${code}`, retryAfterMsOf(res.headers), quotaWaitMs);
  if (s >= 500) return failed('server_error', s, `SP-API failed: HTTP ${s}${code}`, retryAfterMsOf(res.headers));
  return failed('rejected', s, `SP-API rejected the request: HTTP ${s}${code}`);
}

export class SpapiSession {
  private refreshed = false;
  private readonly cacheKey: string;
  /** usage plans are per selling partner and app, and per region's endpoint */
  private readonly rateKey: string;
  private readonly baseUrl: string;

  constructor(
    private readonly endpoints: VendorEndpoints,
    private readonly tokens: TokenCache,
    private readonly rates: SpapiRates,
    private readonly creds: AmazonCredentials,
    private readonly signal: AbortSignal,
    /** Whose credentials these are (`<orgId>:amazon`): their token is forgotten when they are deleted or replaced. */
    private readonly owner?: string,
    /** Whether those credentials are still the org's: no token is bought or sent with ones that moved on. */
    private readonly credentials?: CredentialsCheck,
    /** The tokens the call is handed (VendorCallContext.tokensUsed). */
    private readonly tokensUsed?: Set<string>,
    /** Whether the call may still send after it waited for a token request (GetTokenOptions.afterWait). */
    private readonly afterTokenWait?: () => Promise<FailedOutcome | undefined>,
  ) {
    this.cacheKey = lwaCacheKey(endpoints, creds);
    this.rateKey = `${this.cacheKey}|${creds.region}`;
    this.baseUrl = spapiBaseUrl(endpoints, creds.region);
  }

  /** GET `pathAndQuery` (already encoded) for `op`. Throws TokenFetchError when no token can be had. */
  async get(op: SpapiOperation, pathAndQuery: string): Promise<SpapiAnswer> {
    for (;;) {
      const { token, fresh } = await this.tokens.acquire(this.cacheKey, () => fetchLwaToken(this.endpoints, this.creds), {
        signal: this.signal,
        owner: this.owner,
        credentials: this.credentials,
        tokensUsed: this.tokensUsed,
        afterWait: this.afterTokenWait,
      });
      let res: VendorHttpResponse;
      try {
        res = await vendorRequest({
          method: 'GET',
          url: `${this.baseUrl}${pathAndQuery}`,
          headers: { 'x-amz-access-token': token, 'User-Agent': this.endpoints.userAgent, Accept: 'application/json' },
          signal: this.signal,
          timeoutMs: this.endpoints.timeoutMs,
          connectTimeoutMs: this.endpoints.connectTimeoutMs,
          maxResponseBytes: this.endpoints.maxResponseBytes,
        });
      } catch (e) {
        if (e instanceof VendorHttpError) return { ok: false, outcome: httpErrorOutcome(e) as FailedOutcome };
        throw e;
      }
      // Sent on 200/400/404, never on 429/5xx [src].
      this.rates.observe(this.rateKey, op, parseRateLimit(res.headers['x-amzn-ratelimit-limit']));
      const err = res.status >= 400 ? readError(res) : NO_ERROR;
      const refused = res.status === 401 || (res.status === 403 && err.code === 'Unauthorized');
      if (refused && (err.expired || !fresh) && !this.refreshed) {
        // Drop only the token we used: concurrent callers that saw the same
        // refusal then share one refresh instead of each forcing their own.
        this.refreshed = true;
        this.tokens.invalidate(this.cacheKey, token);
        continue;
      }
      return classify(res, err, OPERATIONS[op].envelope, quotaBackoffMs(this.rates.rateFor(this.rateKey, op)));
    }
  }
}
