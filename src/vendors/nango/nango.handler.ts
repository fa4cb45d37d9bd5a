/**
 * Nango proxy handler (VENDORS.md §4). Sends no `Retries`/`Retry-On` header:
 * the gateway's executor owns retries, and Nango would resend a POST on a
 * reset or 5xx, applying a write twice (§4.3). Nango's own errors
 * (`{"error":{"code"}}`) are told apart from the upstream provider's.
 * `Forward-Headers-On-Redirect: false`: should the provider redirect, the
 * credentials Nango added for it must not follow to wherever it points.
 * Nango forwards upstream only the headers sent as `Nango-Proxy-<Name>`
 * (prefix stripped, VENDORS.md §4.1): the provider's Accept and User-Agent go
 * that way; the unprefixed ones are for Nango itself.
 */
import { spapiQuotaWaitMs, spapiRefusedToken } from '../amazon/spapi.client.js';
import { retryAfterMsOf, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome as fail, type VendorCallContext, type VendorEndpoints, type VendorHandler, type VendorOutcome } from '../vendor-handler.js';
import { buildNangoProxyUrl, canonicalNangoPath, checkNangoParams, checkNangoPath } from './nango-path.js';
import { NANGO_TOOLS } from './nango.tools.js';

interface NangoCredentials {
  secretKey: string;
  connectionId: string;
  providerConfigKey: string;
}

// Header-safe printable ASCII: these values become request headers.
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/;
const SAFE_CODE = /^[a-z_]{1,64}$/;
/**
 * Nango codes meaning "the org's Nango setup is wrong": fix the credentials, do not retry. Newer Nango releases
 * (proxy.service.ts ProxyServiceErrorCode) renamed some of those VENDORS.md §4.2 lists: 404 `unknown_provider_config`
 * is now `unknown_integration`, 400 `server_error` "Failed to get connection" is now `connection_not_found`, and
 * `server_error` "Failed to get connection credentials: '<reason>'" (a failed token refresh) is now
 * `credentials_refresh_failed`. Both spellings are read.
 */
const AUTH_CODES = new Set([
  'missing_auth_header',
  'malformed_auth_header',
  'invalid_secret_key_format',
  'unknown_account',
  'unknown_provider_config',
  'unknown_integration',
  'unknown_connection',
  'connection_not_found',
  'invalid_headers',
  'connection_refresh_backoff',
  // "Failed to get connection credentials": the connection needs re-auth (§4.5).
  'failed_to_get_connection',
  'credentials_refresh_failed',
  // An unknown (well-formed) secret key in releases before `unknown_account`: access.middleware's
  // `unknown_user_account` has no case in NangoError, which answers it as 500 `unhandled_<type>`.
  'unknown_user_account',
  'unhandled_unknown_user_account',
]);

/**
 * Auth codes Nango also answers with a 5xx (a failed token refresh, §4.2; an unknown secret key in older releases),
 * and no provider would use: Nango's own at any status.
 */
const NANGO_ONLY_AUTH_CODES = new Set(['connection_refresh_backoff', 'failed_to_get_connection', 'unknown_user_account', 'unhandled_unknown_user_account']);

/**
 * A scoped secret key without `environment:proxy` (VENDORS.md §4.1): scope.middleware answers 403 `forbidden`
 * "Insufficient scope. Required: environment:proxy" before anything is forwarded. Read by its words too: a
 * provider's own 403 may carry the code `forbidden`, and that one is a refusal of the request.
 */
const INSUFFICIENT_SCOPE = /^Insufficient scope\b/;

/** Nango's words for a failed token refresh, at the refresh's status (§4.2). */
const REFRESH_FAILED_MESSAGE = /^Failed to get connection credentials: '.*'$/s;

/**
 * `server_error` in Nango's own words (§4.2, allProxy.ts): "Failed to get connection" only with 400 (an
 * unknown Connection-Id), and "Failed to get connection credentials: '<reason>'" at the failed refresh's
 * status, 4xx or 5xx; newer releases answer the latter as `credentials_refresh_failed`, in the same words (at
 * a 4xx AUTH_CODES already covers it). Nothing looser: at a 5xx the body may be the provider's ("Failed to get
 * connection: timeout", from its database pool), and calling that a refusal would invite a second send of a
 * POST the provider may have applied.
 */
function isNangoConnectionFailure(code: string, status: number, message: string): boolean {
  if (code === 'credentials_refresh_failed') return status >= 400 && REFRESH_FAILED_MESSAGE.test(message);
  if (code !== 'server_error') return false;
  return (status === 400 && message === 'Failed to get connection') || (status >= 400 && REFRESH_FAILED_MESSAGE.test(message));
}

function parseCredentials(raw: Record<string, unknown>): NangoCredentials | { invalidField: string } {
  for (const field of ['secretKey', 'connectionId', 'providerConfigKey'] as const) {
    const v = raw[field];
    if (typeof v !== 'string' || !HEADER_VALUE.test(v)) return { invalidField: field };
  }
  return { secretKey: raw.secretKey as string, connectionId: raw.connectionId as string, providerConfigKey: raw.providerConfigKey as string };
}

function nangoError(res: VendorHttpResponse): { code: string; message: string } | undefined {
  try {
    const err = (JSON.parse(res.text()) as { error?: unknown } | null)?.error;
    if (typeof err !== 'object' || err === null) return undefined;
    const { code, message } = err as { code?: unknown; message?: unknown };
    return typeof code === 'string' ? { code, message: typeof message === 'string' ? message : '' } : undefined;
  } catch {
    return undefined;
  }
}

function success(res: VendorHttpResponse): VendorOutcome {
  if (res.body.length === 0) return { ok: true, data: null, vendorStatus: res.status };
  const type = res.headers['content-type'] ?? '';
  if (!type.includes('json')) return { ok: true, data: res.text(), vendorStatus: res.status };
  try {
    return { ok: true, data: res.json(), vendorStatus: res.status };
  } catch (e) {
    if (e instanceof VendorHttpError) return httpErrorOutcome(e);
    throw e;
  }
}

/** The wait after a 429 that names none. */
export const NANGO_DEFAULT_429_WAIT_MS = 1_000;

/**
 * The wait after an upstream 429 without a Retry-After. Nango hands the provider's answer back as it came (§4.2), and
 * it is judged as the upstream call would be (§5): SP-API's QuotaExceeded waits 1/rate (spapiQuotaWaitMs: 2 s at
 * 0.5 req/s). A second's wait came back when the bucket held half a token: the retry was spent on a second 429. Any
 * other provider: a second.
 */
const upstream429WaitMs = (res: VendorHttpResponse): number => spapiQuotaWaitMs(res) ?? NANGO_DEFAULT_429_WAIT_MS;

function classify(res: VendorHttpResponse, isPost: boolean): VendorOutcome {
  const s = res.status;
  if (s >= 200 && s < 300) return success(res);
  const retryAfterMs = retryAfterMsOf(res.headers);
  // Nango passes an upstream's non-2xx body back raw (§4.2), and a provider's body may use a code Nango
  // also uses: a code counts as Nango's only at the status Nango answers it with. Read at any status, an
  // upstream 5xx saying "plan_limit" or "too_many_request" would turn a POST the provider may have
  // applied into a refusal, inviting a second one.
  const nango = nangoError(res);
  if (nango) {
    const label = SAFE_CODE.test(nango.code) ? nango.code : 'error';
    if (s === 401 || (AUTH_CODES.has(nango.code) && ((s >= 400 && s < 500) || NANGO_ONLY_AUTH_CODES.has(nango.code)))) {
      return fail('auth', `Nango refused the request: ${label}`, s);
    }
    if (s === 403 && nango.code === 'forbidden' && INSUFFICIENT_SCOPE.test(nango.message)) {
      return fail('auth', 'Nango refused the request: forbidden (the secret key lacks the environment:proxy scope)', s);
    }
    // An unknown connection or one needing re-auth: not transient (§4.5).
    if (isNangoConnectionFailure(nango.code, s, nango.message)) {
      return fail('auth', `Nango could not use the connection: ${label}`, s);
    }
    if (nango.code === 'too_many_request' && s === 429) return withWait(fail('rate_limited', 'Nango rate limit exceeded', s), retryAfterMs, NANGO_DEFAULT_429_WAIT_MS);
    if (nango.code === 'plan_limit' && s === 402) return fail('rejected', `Nango refused the request: ${label}`, s);
    // The gateway never sends Base-Url-Override. `base_url_override_disabled` (400) is newer Nango's
    // validateBaseUrlOverride, before anything is forwarded: the integration's own custom base URL, which the
    // server's configuration does not allow: the org's Nango setup, the same answer every time.
    if (nango.code === 'base_url_override_disabled' && s === 400) {
      return fail('auth', `Nango refused the request: ${label} (the integration's base URL override is disabled on that Nango server)`, s);
    }
    // `base_url_override_not_allowed`: Nango refused to follow the provider's redirect to another host, so
    // the provider already had the request (a POST: unknown). To a GET it is a refusal the same request gets
    // again: not retried, and nothing about Nango's health.
    if (nango.code.startsWith('base_url_override')) {
      return fail(isPost ? 'network' : 'rejected', `Nango did not follow the upstream's redirect: ${label}`, s);
    }
    // Any other code: judge by status like an upstream answer (an upstream body may also carry error.code).
  }
  // Nango adds the provider's credentials itself: an upstream 401 means the connection's token was
  // refused (revoked, expired and not refreshable) — a credentials problem retrying will not fix.
  if (s === 401) return fail('auth', 'upstream refused the connection\'s credentials: HTTP 401 (via Nango)', s);
  // SP-API says so with a 403 `Unauthorized` (VENDORS.md §2.3): read as "check your input" it pointed the agent at
  // its params.
  if (spapiRefusedToken(res)) return fail('auth', 'upstream (SP-API) refused the connection\'s credentials: HTTP 403 Unauthorized (via Nango)', s);
  if (s === 404) return fail('not_found', 'upstream: not found (via Nango)', s);
  // Without a Retry-After, a wait (upstream429WaitMs): jitter alone would spend the next attempts against a quota that
  // refills slowly (SP-API: 0.5/s).
  if (s === 429) return withWait(fail('rate_limited', 'upstream rate limited (via Nango)', s), retryAfterMs, upstream429WaitMs(res));
  if (s >= 500) return fail('server_error', `upstream or Nango failed: HTTP ${s}`, s, retryAfterMs);
  // Not followed. To a POST it may come after the provider acted (303 See
  // Other): the executor then calls the write's outcome unknown, by status.
  if (s >= 300 && s < 400) return fail('rejected', `upstream answered with a redirect, not followed: HTTP ${s} (via Nango)`, s);
  return fail('rejected', `upstream rejected the request: HTTP ${s} (via Nango)`, s);
}

export class NangoHandler implements VendorHandler {
  readonly vendor = 'nango' as const;
  readonly tools = NANGO_TOOLS;

  constructor(private readonly endpoints: VendorEndpoints) {}

  validate(toolName: string, action: string, params: Record<string, unknown>): string | null {
    if (toolName !== 'nango_proxy') return 'toolName: not a Nango tool';
    return checkNangoParams(action, params);
  }

  /**
   * A valid path always with its one leading "/" (the proxy URL drops it: both spellings reach the same path)
   * and upper-case hex in its percent-encodings. Other spellings (encoded ":" or "/", ";")
   * are refused by validate(), not rewritten: see checkNangoPath.
   */
  canonicalParams(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown> {
    const path = params.path;
    if (typeof path !== 'string' || this.validate(toolName, action, params) !== null) return params;
    const canonical = canonicalNangoPath(path);
    return canonical === path ? params : { ...params, path: canonical };
  }

  canonicalParam(toolName: string, action: string, param: string, value: unknown): unknown {
    if (toolName !== 'nango_proxy' || param !== 'path' || typeof value !== 'string' || checkNangoPath(value) !== null) return value;
    return canonicalNangoPath(value);
  }

  async execute(ctx: VendorCallContext): Promise<VendorOutcome> {
    // Again here, so no caller can reach the network with params that skipped validate().
    const invalid = this.validate(ctx.toolName, ctx.action, ctx.params);
    if (invalid) return fail('rejected', invalid);
    const creds = parseCredentials(ctx.credentials);
    if ('invalidField' in creds) return fail('auth', `nango credentials: ${creds.invalidField} is missing or invalid`);
    const isPost = ctx.action === 'post';
    const query = isPost ? undefined : (ctx.params.query as Record<string, unknown> | undefined);
    const url = buildNangoProxyUrl(this.endpoints.nangoHost, ctx.params.path as string, query);
    if (url === null) return fail('rejected', 'path: does not stay under the Nango proxy');
    const headers: Record<string, string> = {
      Authorization: `Bearer ${creds.secretKey}`,
      'Connection-Id': creds.connectionId,
      'Provider-Config-Key': creds.providerConfigKey,
      Accept: 'application/json',
      'User-Agent': this.endpoints.userAgent,
      'Nango-Proxy-Accept': 'application/json',
      'Nango-Proxy-User-Agent': this.endpoints.userAgent,
      'Forward-Headers-On-Redirect': 'false',
    };
    if (isPost) headers['Content-Type'] = 'application/json';
    let res: VendorHttpResponse;
    try {
      res = await vendorRequest({
        method: isPost ? 'POST' : 'GET',
        url,
        headers,
        ...(isPost ? { body: JSON.stringify(ctx.params.body) } : {}),
        signal: ctx.signal,
        timeoutMs: this.endpoints.timeoutMs,
        connectTimeoutMs: this.endpoints.connectTimeoutMs,
        maxResponseBytes: this.endpoints.maxResponseBytes,
      });
    } catch (e) {
      if (e instanceof VendorHttpError) return httpErrorOutcome(e);
      throw e;
    }
    return classify(res, isPost);
  }
}
