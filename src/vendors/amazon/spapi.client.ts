/**
 * One tool call's conversation with SP-API: LWA token from the shared cache,
 * the request, and the single refresh-and-retry the vendor contract allows.
 * SP-API signals a bad token with 403 `Unauthorized`, not 401; only the
 * "expired" variant is worth a refresh (VENDORS.md §2.3, §2.5) - a revoked or
 * malformed token would fail again.
 */
import { TokenCache } from '../auth/token-cache.js';
import { httpErrorOutcome, parseRetryAfterMs, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome, type FailedOutcome, type VendorEndpoints, type VendorFailureKind } from '../vendor-handler.js';
import { spapiBaseUrl, type AmazonCredentials } from './amazon.credentials.js';
import { isObject, type JsonObject } from './amazon.normalise.js';
import { fetchLwaToken, lwaCacheKey } from './lwa.client.js';

export type SpapiAnswer = { ok: true; status: number; body: JsonObject } | { ok: false; outcome: FailedOutcome };

// SP-API error codes are CamelCase words; anything else stays out of messages.
const SAFE_CODE = /^[A-Za-z]{1,40}$/;
const EXPIRED = /access token.*expired/i; // the match amz-tools/amazon-sp-api uses

interface SpapiError {
  code?: string;
  expired: boolean;
}

function readError(res: VendorHttpResponse): SpapiError {
  let body: unknown;
  try {
    body = JSON.parse(res.text());
  } catch {
    return { expired: false };
  }
  const first: unknown = isObject(body) && Array.isArray(body.errors) ? body.errors[0] : undefined;
  if (!isObject(first)) return { expired: false };
  const code = typeof first.code === 'string' && SAFE_CODE.test(first.code) ? first.code : undefined;
  const text = `${typeof first.message === 'string' ? first.message : ''} ${typeof first.details === 'string' ? first.details : ''}`;
  return { code, expired: code === 'Unauthorized' && EXPIRED.test(text) };
}

function failed(kind: VendorFailureKind, status: number, message: string, retryAfterMs?: number): SpapiAnswer {
  return { ok: false, outcome: failedOutcome(kind, message, status, retryAfterMs) };
}

function classify(res: VendorHttpResponse, err: SpapiError): SpapiAnswer {
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
    return { ok: true, status: s, body };
  }
  if (s === 403 || s === 401) return failed('auth', s, `SP-API refused the access token: HTTP ${s}${code}`);
  if (s === 404) return failed('not_found', s, `SP-API: not found${code}`);
  // SP-API sends no Retry-After on 429 [obs]; honour one only if something in between adds it.
  if (s === 429) return failed('rate_limited', s, `SP-API quota exceeded${code}`, parseRetryAfterMs(res.headers['retry-after']));
  if (s >= 500) return failed('server_error', s, `SP-API failed: HTTP ${s}${code}`);
  return failed('rejected', s, `SP-API rejected the request: HTTP ${s}${code}`);
}

export class SpapiSession {
  private refreshed = false;
  private readonly cacheKey: string;
  private readonly baseUrl: string;

  constructor(
    private readonly endpoints: VendorEndpoints,
    private readonly tokens: TokenCache,
    private readonly creds: AmazonCredentials,
    private readonly signal: AbortSignal,
  ) {
    this.cacheKey = lwaCacheKey(endpoints, creds);
    this.baseUrl = spapiBaseUrl(endpoints, creds.region);
  }

  /** GET `pathAndQuery` (already encoded). Throws TokenFetchError when no token can be had. */
  async get(pathAndQuery: string): Promise<SpapiAnswer> {
    for (;;) {
      const token = await this.tokens.getToken(this.cacheKey, () => fetchLwaToken(this.endpoints, this.creds), { signal: this.signal });
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
      const err = res.status >= 400 ? readError(res) : { expired: false };
      if (res.status === 403 && err.expired && !this.refreshed) {
        // Drop only the token we used: concurrent callers that saw the same
        // expiry then share one refresh instead of each forcing their own.
        this.refreshed = true;
        this.tokens.invalidate(this.cacheKey, token);
        continue;
      }
      return classify(res, err);
    }
  }
}
