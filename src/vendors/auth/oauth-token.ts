/**
 * One OAuth2 token request (LWA refresh-token grant, Jumio client-credentials
 * grant) turned into a FetchedToken or a TokenFetchError carrying the outcome
 * the handler returns. Token endpoints are idempotent (a new token, no side
 * effect), so every failure here is reported with requestSent=false: the
 * vendor action itself was never sent and may be retried.
 */
import { retryAfterMsOf, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import type { FailedOutcome, VendorEndpoints, VendorFailureKind } from '../vendor-handler.js';
import { TokenFetchError, type FetchedToken } from './token-cache.js';

export interface OAuthTokenRequest {
  /** For messages only, e.g. "LWA", "Jumio". */
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  endpoints: VendorEndpoints;
  /** Wait this long after a 429 that names no Retry-After: one slot of the endpoint's rate limit. */
  rateLimitBackoffMs: number;
  /**
   * The URL is made from the org's credentials (a Shopify shop domain, a Jumio region): a 404 there is theirs to fix
   * (auth). Absent: the URL is the deployment's (Amazon's AMAZON_LWA_URL), and a 404 is a refusal like any other.
   */
  urlFromCredentials?: boolean;
}

// OAuth error codes are lower_snake ASCII; anything else might be vendor text
// and stays out of the message.
const SAFE_OAUTH_CODE = /^[a-z_]{1,40}$/;
/**
 * An access token the gateway can send as a header value (Authorization: Bearer, x-amz-access-token,
 * X-Shopify-Access-Token): printable ASCII without spaces, as every vendor's is (Atza|..., a JWT, shpat_...,
 * VENDORS.md §1.1, §2.1, §3.1), at most 8 KiB (a JWT runs to 1-2 KiB; 8 KiB is a common server limit on one header
 * line). Anything else (a CR/LF, a space, a megabyte) could never be sent: refused here, never cached, where it
 * would fail every call of the org until its expiry.
 */
const SENDABLE_TOKEN = /^[\x21-\x7e]{1,8192}$/;
/** OAuth error codes that say the authorization server itself is failing for now, whatever status carries them. */
const TRANSIENT_OAUTH_CODES: ReadonlySet<string> = new Set(['server_error', 'temporarily_unavailable']);
/** Used when a vendor omits expires_in: short, so a wrong guess costs little. */
const DEFAULT_LIFETIME_SEC = 300;
/**
 * The longest expires_in believed: a day, Shopify's client-credentials tokens (VENDORS.md §1.1; LWA, Jumio and
 * Shopify's offline tokens last an hour). A vendor's bigger number (1e15) would overflow the token store's
 * interval arithmetic and keep a token cached for good; past the cap a token is only refreshed sooner.
 */
export const MAX_LIFETIME_SEC = 86_400;

function tokenOutcome(kind: VendorFailureKind, status: number | undefined, message: string, retryAfterMs?: number): FailedOutcome {
  return {
    ok: false,
    kind,
    ...(status !== undefined ? { vendorStatus: status } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    requestSent: false,
    message,
  };
}

function tokenFailure(kind: VendorFailureKind, status: number | undefined, message: string, retryAfterMs?: number): TokenFetchError {
  return new TokenFetchError(tokenOutcome(kind, status, message, retryAfterMs));
}

function oauthErrorCode(res: VendorHttpResponse): string | undefined {
  try {
    const code = (JSON.parse(res.text()) as { error?: unknown } | null)?.error;
    return typeof code === 'string' && SAFE_OAUTH_CODE.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

export async function fetchOAuthToken(req: OAuthTokenRequest): Promise<FetchedToken> {
  const { endpoints, label } = req;
  let res: VendorHttpResponse;
  try {
    res = await vendorRequest({
      method: 'POST',
      url: req.url,
      headers: { Accept: 'application/json', 'User-Agent': endpoints.userAgent, ...req.headers },
      body: req.body,
      // No caller signal: this fetch is shared by every waiting caller (single-flight).
      timeoutMs: endpoints.timeoutMs,
      connectTimeoutMs: endpoints.connectTimeoutMs,
      maxResponseBytes: Math.min(endpoints.maxResponseBytes, 64 * 1024),
    });
  } catch (err) {
    if (!(err instanceof VendorHttpError)) throw err;
    const outcome = httpErrorOutcome(err);
    if (outcome.ok) throw err;
    throw new TokenFetchError({ ...outcome, requestSent: false, message: `${label} token request failed: ${err.message}` });
  }

  const status = res.status;
  if (status === 200) {
    let parsed: { access_token?: unknown; expires_in?: unknown; refresh_token?: unknown } | null;
    try {
      parsed = JSON.parse(res.text()) as typeof parsed;
    } catch {
      throw tokenFailure('bad_response', status, `${label} token endpoint answered with a body that is not JSON`);
    }
    const token = parsed?.access_token;
    if (typeof token !== 'string' || token === '') {
      throw tokenFailure('bad_response', status, `${label} token endpoint answered without an access token`);
    }
    if (!SENDABLE_TOKEN.test(token)) {
      // The token itself stays out of the message: it is a secret, and may be the vendor's text.
      throw tokenFailure('bad_response', status, `${label} token endpoint answered with an access token that cannot be sent as a header`);
    }
    const lifetime = Number(parsed?.expires_in);
    const refreshToken = parsed?.refresh_token;
    return {
      token,
      expiresInSec: Number.isFinite(lifetime) && lifetime > 0 ? Math.min(lifetime, MAX_LIFETIME_SEC) : DEFAULT_LIFETIME_SEC,
      ...(typeof refreshToken === 'string' && refreshToken !== '' ? { refreshToken } : {}),
    };
  }
  const code = oauthErrorCode(res);
  const suffix = code ? ` (${code})` : '';
  // The server's own trouble, named by its code (RFC 6749 §4.1.2.1; LWA lists both, VENDORS.md §2.1, and Amazon's
  // client reads the code, not the status): at a 400 too it is no fault of the credentials — a failure that
  // passes, never CREDENTIALS_INVALID sending an admin to re-enter credentials that were fine. (A 429 or 5xx
  // carrying them is read by its status below: a rate limit waits as one.)
  const refusalStatus = status === 400 || status === 401 || status === 403;
  if (refusalStatus && code !== undefined && TRANSIENT_OAUTH_CODES.has(code)) {
    throw tokenFailure('server_error', status, `${label} token endpoint is temporarily failing: HTTP ${status}${suffix}`, retryAfterMsOf(res.headers));
  }
  // invalid_grant / invalid_client and friends: a credentials problem, never retryable.
  if (refusalStatus) {
    throw tokenFailure('auth', status, `${label} refused the credentials: HTTP ${status}${suffix}`);
  }
  // No token endpoint there: the credentials name a shop (or region) the vendor does not have — theirs to fix too.
  if (status === 404 && req.urlFromCredentials) {
    throw tokenFailure('auth', status, `${label} token endpoint not found: HTTP 404 (check the shop domain or region in the credentials)`);
  }
  if (status === 429) {
    const limited = tokenOutcome('rate_limited', status, `${label} token endpoint rate limited`);
    throw new TokenFetchError(withWait(limited, retryAfterMsOf(res.headers), req.rateLimitBackoffMs));
  }
  if (status >= 500) throw tokenFailure('server_error', status, `${label} token endpoint failed: HTTP ${status}`, retryAfterMsOf(res.headers));
  throw tokenFailure('rejected', status, `${label} token endpoint answered HTTP ${status}${suffix}`);
}
