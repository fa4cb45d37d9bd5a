/**
 * Jumio KYX handler: `kyc.get_status` (VENDORS.md §3). Polls the execution's
 * status and, once PROCESSED, fetches the details once and returns only the
 * decisions (see jumio.safe-details.ts). A 401 earns one token refresh and one
 * retry per call; 403 is a header/permission problem and is not retried.
 */
import { TokenCache, TokenFetchError } from '../auth/token-cache.js';
import { parseRetryAfterMs, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome as fail, type FailedOutcome, type VendorCallContext, type VendorEndpoints, type VendorHandler, type VendorOutcome } from '../vendor-handler.js';
import { fetchJumioToken, jumioCacheKey } from './jumio-auth.client.js';
import { jumioRetrievalBaseUrl, parseJumioCredentials, type JumioCredentials } from './jumio.credentials.js';
import { jumioStatus, safeJumioDetails } from './jumio.safe-details.js';
import { JUMIO_TOOLS, UUID } from './jumio.tools.js';

/** Retrieval allows 15 requests/s per tenant (75 per 5 s, VENDORS.md §3.3): one slot is 67 ms. */
export const JUMIO_RETRIEVAL_BACKOFF_MS = Math.ceil(1000 / 15);

type Answer = { ok: true; status: number; body: unknown } | { ok: false; outcome: FailedOutcome };

interface CallState {
  creds: JumioCredentials;
  cacheKey: string;
  signal: AbortSignal;
  refreshed: boolean;
}

function classify(res: VendorHttpResponse): Answer {
  const s = res.status;
  if (s >= 200 && s < 300) {
    try {
      return { ok: true, status: s, body: res.json() };
    } catch (e) {
      if (e instanceof VendorHttpError) return { ok: false, outcome: httpErrorOutcome(e) as FailedOutcome };
      throw e;
    }
  }
  if (s === 401 || s === 403) return { ok: false, outcome: fail('auth', `Jumio refused the request: HTTP ${s}`, s) };
  if (s === 404) return { ok: false, outcome: fail('not_found', 'Jumio: workflow execution not found', s) };
  // Jumio documents no Retry-After on 429 (use one if it is ever sent): wait
  // at least one slot of the retrieval limit before trying again.
  if (s === 429) {
    return { ok: false, outcome: withWait(fail('rate_limited', 'Jumio rate limit exceeded', s), parseRetryAfterMs(res.headers['retry-after']), JUMIO_RETRIEVAL_BACKOFF_MS) };
  }
  if (s >= 500) return { ok: false, outcome: fail('server_error', `Jumio failed: HTTP ${s}`, s, parseRetryAfterMs(res.headers['retry-after'])) };
  return { ok: false, outcome: fail('rejected', `Jumio rejected the request: HTTP ${s}`, s) };
}

export class JumioHandler implements VendorHandler {
  readonly vendor = 'jumio' as const;
  readonly tools = JUMIO_TOOLS;

  constructor(
    private readonly endpoints: VendorEndpoints,
    private readonly tokens: TokenCache = new TokenCache(),
  ) {}

  /**
   * A valid workflow execution id in lower case: Jumio reads a UUID's hex digits alike in either case, and a
   * policy rule compares the text, so the upper-case spelling would walk around `workflowExecutionId eq "…"`.
   */
  canonicalParams(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown> {
    const id = params.workflowExecutionId;
    const canonical = this.canonicalParam(toolName, action, 'workflowExecutionId', id);
    return canonical === id ? params : { ...params, workflowExecutionId: canonical };
  }

  /**
   * `includeDetails` spelled out when left out: its default (true) fetches the decision, so a rule on
   * `includeDetails eq true` must see the call that leaves it out as the one that sends it.
   */
  withDefaults(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown> {
    if (toolName !== 'kyc' || action !== 'get_status' || Object.hasOwn(params, 'includeDetails')) return params;
    return { ...params, includeDetails: true };
  }

  canonicalParam(toolName: string, action: string, param: string, value: unknown): unknown {
    if (toolName !== 'kyc' || action !== 'get_status' || param !== 'workflowExecutionId' || typeof value !== 'string' || !UUID.test(value)) return value;
    return value.toLowerCase();
  }

  async execute(ctx: VendorCallContext): Promise<VendorOutcome> {
    const creds = parseJumioCredentials(ctx.credentials);
    if ('invalidField' in creds) return fail('auth', `jumio credentials: ${creds.invalidField} is missing or invalid`);
    if (ctx.action !== 'get_status') return fail('rejected', 'kyc has no such action');
    const id = ctx.params.workflowExecutionId;
    // The id goes into the URL path: re-check it even though the schema did.
    if (typeof id !== 'string' || !UUID.test(id)) return fail('rejected', 'workflowExecutionId: must be a UUID');
    const state: CallState = { creds, cacheKey: jumioCacheKey(this.endpoints, creds), signal: ctx.signal, refreshed: false };
    const base = `${jumioRetrievalBaseUrl(this.endpoints, creds.region)}/api/v1/accounts/${creds.accountId}/workflow-executions/${id}`;
    try {
      const res = await this.get(state, `${base}/status`);
      if (!res.ok) return res.outcome;
      const body = res.body as { workflowExecution?: { status?: unknown } } | null;
      const status = jumioStatus(body?.workflowExecution?.status);
      if (status === null) return fail('bad_response', 'Jumio status answer has no workflow status', res.status);
      if (status !== 'PROCESSED' || ctx.params.includeDetails === false) {
        return { ok: true, data: { workflowExecutionId: id, status }, vendorStatus: res.status };
      }
      // Details are fetched once, only when final (Jumio's polling guidance).
      const details = await this.get(state, base);
      if (!details.ok) return details.outcome;
      return { ok: true, data: safeJumioDetails(id, status, details.body), vendorStatus: details.status };
    } catch (err) {
      if (err instanceof TokenFetchError) return err.outcome;
      throw err;
    }
  }

  private async get(state: CallState, url: string): Promise<Answer> {
    for (;;) {
      const token = await this.tokens.getToken(state.cacheKey, () => fetchJumioToken(this.endpoints, state.creds), { signal: state.signal });
      let res: VendorHttpResponse;
      try {
        res = await vendorRequest({
          method: 'GET',
          url,
          headers: { Authorization: `Bearer ${token}`, Accept: 'application/json', 'User-Agent': this.endpoints.userAgent },
          signal: state.signal,
          timeoutMs: this.endpoints.timeoutMs,
          connectTimeoutMs: this.endpoints.connectTimeoutMs,
          maxResponseBytes: this.endpoints.maxResponseBytes,
        });
      } catch (e) {
        if (e instanceof VendorHttpError) return { ok: false, outcome: httpErrorOutcome(e) as FailedOutcome };
        throw e;
      }
      if (res.status === 401 && !state.refreshed) {
        state.refreshed = true;
        this.tokens.invalidate(state.cacheKey, token);
        continue;
      }
      return classify(res);
    }
  }
}
