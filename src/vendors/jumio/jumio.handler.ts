/**
 * Jumio KYX handler: `kyc.get_status` (VENDORS.md §3). Polls the execution's
 * status and, once PROCESSED, fetches the details once and returns only the
 * decisions (see jumio.safe-details.ts). A 401 earns one token refresh and one
 * retry per call; 403 is a header/permission problem and is not retried.
 */
import { credentialsCheckOf, TokenCache, TokenFetchError, type CredentialsCheck } from '../auth/token-cache.js';
import { retryAfterMsOf, withWait } from '../http/retry-after.js';
import { httpErrorOutcome, VendorHttpError, vendorRequest, type VendorHttpResponse } from '../http/vendor-http.js';
import { failedOutcome as fail, standingAfterTokenWait, type FailedOutcome, type VendorCallContext, type VendorEndpoints, type VendorHandler, type VendorOutcome } from '../vendor-handler.js';
import { fetchJumioToken, jumioCacheKey } from './jumio-auth.client.js';
import { jumioRetrievalBaseUrl, parseJumioCredentials, type JumioCredentials } from './jumio.credentials.js';
import { jumioStatus, safeJumioDetails } from './jumio.safe-details.js';
import { JUMIO_TOOLS, UUID } from './jumio.tools.js';

/** Retrieval allows 15 requests/s per tenant (75 per 5 s, VENDORS.md §3.3): one slot is 67 ms. */
export const JUMIO_RETRIEVAL_BACKOFF_MS = Math.ceil(1000 / 15);

/** The params of kyc.get_status that are UUIDs, spelled in lower case (canonicalParams). */
const UUID_PARAMS: readonly string[] = ['workflowExecutionId', 'accountId'];

type Answer = { ok: true; status: number; body: unknown } | { ok: false; outcome: FailedOutcome };

interface CallState {
  creds: JumioCredentials;
  cacheKey: string;
  signal: AbortSignal;
  refreshed: boolean;
  /** `<orgId>:jumio`: the token is forgotten when the org's credentials are deleted or replaced. */
  owner: string;
  /** Whether the call's credentials are still the org's: no token is bought or sent with ones that moved on. */
  credentials?: CredentialsCheck;
  /** The tokens the call is handed (VendorCallContext.tokensUsed). */
  tokensUsed?: Set<string>;
  /** Whether the call may still send after it waited for a token request (GetTokenOptions.afterWait). */
  afterTokenWait?: () => Promise<FailedOutcome | undefined>;
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
    return { ok: false, outcome: withWait(fail('rate_limited', 'Jumio rate limit exceeded', s), retryAfterMsOf(res.headers), JUMIO_RETRIEVAL_BACKOFF_MS) };
  }
  if (s >= 500) return { ok: false, outcome: fail('server_error', `Jumio failed: HTTP ${s}`, s, retryAfterMsOf(res.headers)) };
  return { ok: false, outcome: fail('rejected', `Jumio rejected the request: HTTP ${s}`, s) };
}

/**
 * Whether an answer names another workflow execution or account than the one asked for (status:
 * `workflowExecution.id`, details: `workflow.id`; both `account.id`, VENDORS.md §3.2): a proxy or cache mixing answers
 * up, another end user's verdict, never handed back as this one's (as Shopify's answersAnother). UUIDs are compared
 * in lower case, the spelling the request uses (canonicalParams); an answer that names none is taken as it is.
 */
function answersAnother(body: unknown, execution: 'workflowExecution' | 'workflow', id: string, accountId: string): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const named = (v: unknown): unknown => (typeof v === 'object' && v !== null ? (v as { id?: unknown }).id : undefined);
  const differs = (found: unknown, asked: string): boolean => typeof found === 'string' && found.toLowerCase() !== asked.toLowerCase();
  const b = body as Record<string, unknown>;
  return differs(named(b[execution]), id) || differs(named(b.account), accountId);
}

/**
 * The account the execution is asked for under. Jumio KYX keeps one account per end user and files each end user's
 * workflow executions under their own account (VENDORS.md §3.2), so the call's accountId names it; the credentials'
 * accountId is the org's default, for a call that names none.
 */
function executionAccount(param: unknown, creds: JumioCredentials): { ok: true; id: string } | { ok: false; message: string } {
  if (param !== undefined) {
    // It goes into the URL path: re-checked even though the schema did.
    return typeof param === 'string' && UUID.test(param) ? { ok: true, id: param } : { ok: false, message: 'accountId: must be a UUID' };
  }
  return { ok: true, id: creds.accountId };
}

export class JumioHandler implements VendorHandler {
  readonly vendor = 'jumio' as const;
  readonly tools = JUMIO_TOOLS;

  constructor(
    private readonly endpoints: VendorEndpoints,
    private readonly tokens: TokenCache = new TokenCache(),
  ) {}

  /**
   * A valid workflow execution id and account id in lower case: Jumio reads a UUID's hex digits alike in either
   * case, and a policy rule compares the text, so the upper-case spelling would walk around `workflowExecutionId eq
   * "…"` (or `accountId eq "…"`), and the ledger and the idempotency digest would hold two spellings of one call.
   */
  canonicalParams(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown> {
    let out = params;
    for (const name of UUID_PARAMS) {
      if (!Object.hasOwn(params, name)) continue;
      const value = params[name];
      const canonical = this.canonicalParam(toolName, action, name, value);
      if (canonical !== value) out = { ...out, [name]: canonical };
    }
    return out;
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
    if (toolName !== 'kyc' || action !== 'get_status' || !UUID_PARAMS.includes(param) || typeof value !== 'string' || !UUID.test(value)) return value;
    return value.toLowerCase();
  }

  async execute(ctx: VendorCallContext): Promise<VendorOutcome> {
    const creds = parseJumioCredentials(ctx.credentials);
    if ('invalidField' in creds) return fail('auth', `jumio credentials: ${creds.invalidField} is missing or invalid`);
    if (ctx.action !== 'get_status') return fail('rejected', 'kyc has no such action');
    const id = ctx.params.workflowExecutionId;
    // The id goes into the URL path: re-check it even though the schema did.
    if (typeof id !== 'string' || !UUID.test(id)) return fail('rejected', 'workflowExecutionId: must be a UUID');
    const account = executionAccount(ctx.params.accountId, creds);
    if (!account.ok) return fail('rejected', account.message);
    const state: CallState = { creds, cacheKey: jumioCacheKey(this.endpoints, creds), signal: ctx.signal, refreshed: false, owner: `${ctx.orgId}:jumio`, credentials: credentialsCheckOf(ctx), tokensUsed: ctx.tokensUsed, afterTokenWait: standingAfterTokenWait(ctx, 'jumio') };
    const base = `${jumioRetrievalBaseUrl(this.endpoints, creds.region)}/api/v1/accounts/${account.id}/workflow-executions/${id}`;
    try {
      const res = await this.get(state, `${base}/status`);
      if (!res.ok) return res.outcome;
      const body = res.body as { workflowExecution?: { status?: unknown } } | null;
      const status = jumioStatus(body?.workflowExecution?.status);
      if (status === null) return fail('bad_response', 'Jumio status answer has no workflow status', res.status);
      if (answersAnother(body, 'workflowExecution', id, account.id)) return fail('bad_response', 'Jumio answered with another workflow execution than the one asked for', res.status);
      if (status !== 'PROCESSED' || ctx.params.includeDetails === false) {
        return { ok: true, data: { workflowExecutionId: id, status }, vendorStatus: res.status };
      }
      // Details are fetched once, only when final (Jumio's polling guidance).
      const details = await this.get(state, base);
      if (!details.ok) return details.outcome;
      if (answersAnother(details.body, 'workflow', id, account.id)) return fail('bad_response', 'Jumio answered with details of another workflow execution than the one asked for', details.status);
      return { ok: true, data: safeJumioDetails(id, status, details.body), vendorStatus: details.status };
    } catch (err) {
      if (err instanceof TokenFetchError) return err.outcome;
      throw err;
    }
  }

  private async get(state: CallState, url: string): Promise<Answer> {
    for (;;) {
      const token = await this.tokens.getToken(state.cacheKey, () => fetchJumioToken(this.endpoints, state.creds), {
        signal: state.signal,
        owner: state.owner,
        credentials: state.credentials,
        tokensUsed: state.tokensUsed,
        afterWait: state.afterTokenWait,
      });
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
