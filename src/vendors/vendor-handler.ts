/**
 * The one interface every vendor implements. A vendor folder (src/vendors/<vendor>/)
 * declares its tools (schemas, risk, idempotency, cost) and executes actions.
 * Expected vendor failures are returned as values (VendorOutcome), never thrown;
 * a thrown error is a bug and the executor records it as EXECUTION_ERROR.
 */
export type VendorKey = 'shopify' | 'amazon' | 'jumio' | 'nango';
export const VENDOR_KEYS: readonly VendorKey[] = ['shopify', 'amazon', 'jumio', 'nango'];

export type RiskLevel = 'low' | 'medium' | 'high';
export type SideEffect = 'read' | 'write';

/** A JSON Schema (draft 2020-12 subset that ajv accepts). */
export type JsonSchema = Record<string, unknown>;

export interface ToolActionSpec {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  riskLevel: RiskLevel;
  sideEffect: SideEffect;
  /** True when re-sending the same request cannot cause a second side effect. */
  idempotent: boolean;
  /**
   * Writes: true when a second CALL with the same input — a new tool_use, so a
   * new idempotency key — leaves the same state, as overwriting the order note
   * does. Then a write whose last answer was a 5xx is `failed` (trying again is
   * harmless); otherwise a 5xx leaves its outcome unknown (`indeterminate`).
   */
  overwrite?: boolean;
  costCents: number;
  /** Top-level params that are decimal strings (amounts): policy rules compare them by value (eq, ne, in). */
  decimalParams?: readonly string[];
  /** Top-level params that are URL paths: policy rules compare them ignoring one trailing "/" (eq, ne, in). */
  pathParams?: readonly string[];
  /** Top-level params whose values the vendor sends as text (a query string): policy rules also equate the same text, false and "false" (eq, ne, in). */
  textParams?: readonly string[];
  /**
   * Optional top-level params whose absence stands for a value the gateway learns only after the policy ran (from
   * the vendor, or from the org's credentials), by param: what leaving it out means, as a clause ("the refund is in
   * the order's currency"). The policy sees no value there, so an eq, ne or in on such a param would judge the call
   * as if it had none while the vendor acts on one: a PUT refuses those unless an exists condition on the param
   * comes first (validatePolicyRules). Kept out of inputSchema, which the model reads as it is.
   */
  unseenDefaults?: Readonly<Record<string, string>>;
}

export interface ToolSpec {
  name: string;
  vendor: VendorKey;
  description: string;
  actions: ToolActionSpec[];
}

/** Server-side vendor endpoints and limits (from config, never from a request). */
export interface VendorEndpoints {
  shopifyBaseUrl?: string; // replaces https://{shopDomain}
  shopifyApiVersion: string; // e.g. 2026-07
  amazonLwaUrl: string;
  amazonSpapiBaseUrl?: string; // default https://sellingpartnerapi-{na|eu|fe}.amazon.com
  amazonOrdersApi?: 'v0' | '2026-01-01'; // SP-API Orders version; default v0 (AMAZON_ORDERS_API)
  jumioAuthBaseUrl?: string; // default https://auth.{region}.jumio.ai
  jumioRetrievalBaseUrl?: string; // default https://retrieval.{region}.jumio.ai
  nangoHost: string;
  timeoutMs: number;
  connectTimeoutMs: number;
  maxResponseBytes: number;
  userAgent: string;
}

export interface VendorCallContext {
  orgId: string;
  toolCallId: string;
  /** The ledger's idempotency key of this call; stable across resends (refund keys derive from it). */
  idempotencyKey: string;
  toolName: string;
  action: string;
  /** Params already validated against the action's inputSchema (no `action` key). */
  params: Record<string, unknown>;
  /** Decrypted integration config of the org for this vendor (API.md §7). */
  credentials: Record<string, unknown>;
  /** Aborted when the whole call's time budget is spent. */
  signal: AbortSignal;
  /** When that budget runs out, on performance.now()'s clock (a handler that waits can leave its request room). */
  deadline?: number;
  /** 0 for the first attempt, 1.. for retries. */
  attempt: number;
  /**
   * Kept across this call's attempts, and only them: a handler may note its
   * progress so a retry resumes where the failed attempt stopped instead of
   * repeating requests against a rate limit. In memory, never persisted.
   */
  scratch: Map<string, unknown>;
  /**
   * The access tokens this call's requests were sent with that `credentials` does not hold (bought from a token
   * endpoint: TokenCache adds each it hands out, GetTokenOptions.tokensUsed). The executor redacts them by value from
   * the answer, as it does the config's secrets: a vendor echoing the bearer it got would hand it to the agent.
   */
  tokensUsed?: Set<string>;
  /**
   * Whether the call may still be sent, read now: for a handler that waits before it sends a write (the order's refund
   * lease), so a change answered 200/204 meanwhile is in force, as it is between attempts (the executor asks the same
   * before a retry). Absent: nothing to check against.
   */
  sendStanding?: () => Promise<SendStanding>;
  /**
   * Whether the credentials this call loaded are still the org's as far as this process knows (no PUT or DELETE of
   * them answered here since they were read): synchronous, no database. A token bought with credentials that moved on
   * is neither kept nor sent (TokenCache.acquire). Absent: nothing to check against.
   */
  credentialsCurrent?: () => boolean;
}

/** The least time a request is sent with: less, and its answer would come past the call's deadline. */
export const SEND_FLOOR_MS = 20;
/**
 * The share of the call's budget a write needs left when it is sent after a wait (the executor's retry after a
 * refusal, a handler's send after a slow token fetch or renewal). Sent with less, its answer would likely come past
 * the deadline and the call end indeterminate though the vendor had cleanly refused it, or never had it.
 */
export const WRITE_SEND_ROOM = 0.25;

/** The time a write sent after a wait needs left before the call's deadline (VENDOR_TIMEOUT_MS = `timeoutMs`). */
export function writeSendRoomMs(timeoutMs: number): number {
  return Math.max(SEND_FLOOR_MS, timeoutMs * WRITE_SEND_ROOM);
}

/**
 * 'allowed'; the org's credentials of the vendor replaced or deleted since the call loaded them; the run ended; the
 * org's tool_calling_enabled turned off; or not known (the check failed: the gateway's database, nothing to blame).
 */
export type SendStanding = 'allowed' | 'credentials-changed' | 'credentials-deleted' | 'run-ended' | 'disabled' | 'unknown';

export type VendorFailureKind =
  | 'not_found' // 404 / empty payload → VENDOR_NOT_FOUND
  | 'auth' // 401/403 after at most one token refresh → CREDENTIALS_INVALID
  | 'rate_limited' // 429 / THROTTLED / QuotaExceeded → VENDOR_RATE_LIMITED (retryable)
  | 'server_error' // 5xx → VENDOR_ERROR (retryable)
  | 'timeout' // no answer in time → VENDOR_TIMEOUT (retryable for reads; for a write only if !requestSent)
  | 'network' // connection refused/reset → VENDOR_ERROR (retryable)
  | 'bad_response' // malformed JSON, unexpected shape → VENDOR_ERROR (not retryable); a write answered 2xx → OUTCOME_UNKNOWN
  | 'too_large' // body over the hard cap → VENDOR_ERROR (not retryable); a write answered 2xx → OUTCOME_UNKNOWN
  | 'rejected' // vendor refused the request (4xx, userErrors) → VENDOR_ERROR (not retryable); a write answered 3xx → OUTCOME_UNKNOWN
  // The vendor is still running an earlier request under this call's idempotency
  // key (Shopify "currently in progress"): polled with the same key within the
  // call's budget; a write still unsettled → OUTCOME_UNKNOWN.
  | 'in_progress'
  // The idempotency key was already used with other parameters: an earlier
  // attempt reached the vendor → OUTCOME_UNKNOWN (not retryable, never re-keyed).
  | 'key_conflict';

export type VendorOutcome =
  | { ok: true; data: unknown; vendorStatus: number }
  | {
      ok: false;
      kind: VendorFailureKind;
      vendorStatus?: number;
      /** Vendor asked us to wait this long (Retry-After, THROTTLED cost maths), or the handler's default (below). */
      retryAfterMs?: number;
      /**
       * retryAfterMs is the gateway's default, not the vendor's: its answer named no wait (no Retry-After, no
       * documented body field such as Shopify's throttle cost). Slept on before a retry, never handed to the agent
       * as retryAfterSeconds: API.md promises that only "when the vendor said how long to wait" (see withWait).
       */
      retryAfterIsDefault?: true;
      /** False only when we know the request never left (connect failed/timed out). */
      requestSent: boolean;
      /**
       * An earlier request of this call (a refund's order read) reached, or may have reached, the vendor, though the
       * one `requestSent` speaks of (the mutation) never left: the call is charged and counts as a vendor call.
       */
      readSent?: true;
      /** Short, safe text for logs/ledger: no vendor body, no secrets, no PII. */
      message: string;
      /** The gateway's own failure (its database), not the vendor's: never counts against the vendor's breaker. */
      local?: boolean;
      /** Not sent because the org's credentials were deleted meanwhile (notSentAfterWait): CREDENTIALS_NOT_FOUND, as for a call started after. */
      credentialsGone?: true;
      /**
       * An answer that cannot be placed before or in the run (Shopify's 200 {"errors":[{"message":"Timeout"}]}):
       * the request may still be running at the vendor, as after a lost answer.
       */
      mayStillRun?: boolean;
      /**
       * A readable answer that itself leaves the outcome unknown (a refund recorded with its payment transaction in
       * ERROR: the payment provider's trouble, not the vendor's): the call stays as its kind says (a write
       * OUTCOME_UNKNOWN), but the vendor answered well, so it says nothing against its health (the circuit breaker).
       */
      answerRead?: true;
    };

export type FailedOutcome = Extract<VendorOutcome, { ok: false }>;

/**
 * A status of one of the final HTTP classes (2xx-5xx, RFC 9110 §15). Node's parser hands on any three digits of a
 * status line ("HTTP/1.1 000" is statusCode 0, "099" is 99): such an answer is neither a success, a refusal nor a
 * vendor error, and says nothing of what became of the request.
 */
export function hasFinalStatusClass(status: number): boolean {
  return status >= 200 && status <= 599;
}

/**
 * A failed outcome. The request counts as sent exactly when the vendor
 * answered (a status is given), unless `requestSent` says otherwise: a refund
 * stopped by what its preceding read answered never sent the mutation.
 */
export function failedOutcome(
  kind: VendorFailureKind,
  message: string,
  vendorStatus?: number,
  retryAfterMs?: number,
  requestSent: boolean = vendorStatus !== undefined,
): FailedOutcome {
  return {
    ok: false,
    kind,
    requestSent,
    message,
    ...(vendorStatus !== undefined ? { vendorStatus } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  };
}

/**
 * The answer of a call that waited before its send (a refund for its order's lease, any call for its access token) and
 * may not send any more (sendStanding): a change answered 200/204 meanwhile is in force, as between attempts.
 * Nothing was sent, and the vendor refused nothing ("fix your credentials" would be false): the gateway's own
 * failure (`local`: EXECUTION_ERROR, no retry, nothing against the breaker). `waited`: "this refund waited for the
 * order"; `what`: what was not sent.
 */
export function notSentAfterWait(standing: Exclude<SendStanding, 'allowed'>, vendor: VendorKey, waited: string, what: string): FailedOutcome {
  const why = {
    'credentials-changed': `the org's ${vendor} credentials were replaced while ${waited}`,
    'credentials-deleted': `the org's ${vendor} credentials were deleted while ${waited}`,
    'run-ended': `the run ended while ${waited}`,
    disabled: `the org's tool calling was turned off while ${waited}`,
    unknown: `the credentials, the run and the flag could not be checked before ${what} was sent (the database is unavailable)`,
  }[standing];
  return {
    ...failedOutcome('network', `${why}; nothing was sent`, undefined, undefined, false),
    local: true,
    ...(standing === 'credentials-deleted' ? { credentialsGone: true as const } : {}),
  };
}

/**
 * For TokenCache (GetTokenOptions.afterWait): after a call waited for a token request, whether it may still send
 * (sendStanding), as notSentAfterWait's outcome when not. Undefined without sendStanding: nothing to check against.
 */
export function standingAfterTokenWait(ctx: Pick<VendorCallContext, 'sendStanding'>, vendor: VendorKey): (() => Promise<FailedOutcome | undefined>) | undefined {
  const standing = ctx.sendStanding;
  if (!standing) return undefined;
  return async () => {
    const now = await standing();
    return now === 'allowed' ? undefined : notSentAfterWait(now, vendor, 'this call waited for its access token', 'the request');
  };
}

export interface VendorHandler {
  readonly vendor: VendorKey;
  readonly tools: ToolSpec[];
  /**
   * Extra checks beyond the JSON schema, done before anything is sent
   * (e.g. Nango path safety). Returns a message naming the field, or null.
   */
  validate?(toolName: string, action: string, params: Record<string, unknown>): string | null;
  /**
   * The one spelling of params the vendor reads alike (e.g. a Nango path with or without its leading
   * "/"), applied before the policy, the digest, the ledger and the call all see them, so a rule
   * cannot be walked around by another spelling. Only valid params are rewritten; others come back as they are.
   */
  canonicalParams?(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown>;
  /**
   * One param's value in the spelling canonicalParams gives it, when the value is valid on its own; anything
   * else as it is. For a policy rule's values, which are spelled as the admin typed them: cheap, as it runs
   * for every value a rule compares (canonicalParams may check the whole call). Needed with canonicalParams.
   */
  canonicalParam?(toolName: string, action: string, param: string, value: unknown): unknown;
  /**
   * The canonical params with the defaults the handler acts on spelled out (e.g. Jumio's includeDetails: true), for
   * the policy, the ledger and the call: a rule on a param must see the call that leaves it out as the one that sends
   * its default. Not for the action digest, which stays over the params as sent (canonicalParams): a call recorded
   * before a default was spelled out is replayed, not refused as another action.
   */
  withDefaults?(toolName: string, action: string, params: Record<string, unknown>): Record<string, unknown>;
  execute(ctx: VendorCallContext): Promise<VendorOutcome>;
}
