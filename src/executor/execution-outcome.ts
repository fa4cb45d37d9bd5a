/** What the executor hands back to the pipeline: always a value, never a throw. */
export type ExecutionErrorCode =
  | 'VENDOR_ERROR'
  | 'VENDOR_TIMEOUT'
  | 'VENDOR_RATE_LIMITED'
  | 'VENDOR_NOT_FOUND'
  | 'CREDENTIALS_INVALID'
  | 'CIRCUIT_OPEN'
  | 'CREDENTIALS_NOT_FOUND'
  | 'EXECUTION_ERROR'
  | 'OUTCOME_UNKNOWN';

export interface RetryRecord {
  attempt: number;
  delayMs: number;
  reason: string;
}

/**
 * `vendorReached`: whether any request of the call reached — or may have
 * reached — the vendor; what a call is charged for (the action's costCents).
 * True on success, when an attempt was answered by the vendor or may have left
 * (`requestSent`), and when an exception was thrown once a vendor request was
 * under way (a request that may have been sent counts as sent). False when the
 * call stopped before sending anything: credentials missing or undecryptable,
 * breaker open, the time budget spent before the first send, a connect
 * failure, an exception before any attempt.
 */
export type ExecutionOutcome =
  | { status: 'succeeded'; result: unknown; vendorStatus: number | null; retries: RetryRecord[]; durationMs: number; vendorReached: boolean }
  | {
      status: 'failed' | 'indeterminate';
      errorCode: ExecutionErrorCode;
      /** Safe for ops (no vendor text, no secrets). Never shown to the model. */
      errorText: string;
      vendorStatus: number | null;
      /**
       * A failure at the vendor: true when it refused the input (the same input fails the same way), false for
       * trouble on its side or on the way (it may work later). Also false for EXECUTION_ERROR when the gateway's own
       * database failed before anything was sent (it may work later). Absent when the call stopped before the vendor
       * for any other reason.
       */
      vendorRefused?: boolean;
      retryAfterSeconds?: number;
      retries: RetryRecord[];
      durationMs: number;
      vendorReached: boolean;
    };

/** What the ledger row keeps of vendorRefused: null when the call succeeded or stopped before the vendor. */
export function vendorRefusedOf(o: ExecutionOutcome): boolean | null {
  return o.status === 'succeeded' ? null : (o.vendorRefused ?? null);
}

/**
 * A call that never reached its vendor, recorded failed (not charged). `passing`: the gateway's own trouble or a change
 * that stopped the send (vendorRefused false: the model is told nothing was sent and a new call may work,
 * tool-call-body.ts); else a call that cannot be run at all (vendorRefused absent: "the tool failed").
 */
export function notSentOutcome(errorText: string, opts: { errorCode?: ExecutionErrorCode; durationMs?: number; passing?: boolean } = {}): ExecutionOutcome {
  return {
    status: 'failed', errorCode: opts.errorCode ?? 'EXECUTION_ERROR', errorText, vendorStatus: null, retries: [], durationMs: opts.durationMs ?? 0,
    vendorReached: false, ...(opts.passing ? { vendorRefused: false } : {}),
  };
}
