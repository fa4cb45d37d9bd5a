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

export type ExecutionOutcome =
  | { status: 'succeeded'; result: unknown; vendorStatus: number | null; retries: RetryRecord[]; durationMs: number }
  | {
      status: 'failed' | 'indeterminate';
      errorCode: ExecutionErrorCode;
      /** Safe for ops (no vendor text, no secrets). Never shown to the model. */
      errorText: string;
      vendorStatus: number | null;
      retryAfterSeconds?: number;
      retries: RetryRecord[];
      durationMs: number;
    };
