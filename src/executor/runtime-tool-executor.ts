import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { DelegateBackoff, handleWhenResult, retry } from 'cockatiel';
import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { DecryptionError } from '../common/crypto/envelope-cipher.js';
import { loggableErrorText, loggableErrorWithStack } from '../common/errors/loggable-error.js';
import { failedStatementFields, isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { canonicalJson } from '../common/canonical-json.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CredentialsService } from '../credentials/credentials.service.js';
import { Sql } from '../db/sql.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { credentialSecretForms, redactCredentialValues, redactCredentialValuesInText } from '../redaction/credential-values.js';
import { clampRetryAfterMs, vendorNamedWaitMs } from '../vendors/http/retry-after.js';
import { timeVendorExchanges } from '../vendors/http/vendor-http.js';
import { failedOutcome as fail, SEND_FLOOR_MS, writeSendRoomMs, type SendStanding, type VendorKey, type VendorOutcome } from '../vendors/vendor-handler.js';
import { CircuitBreaker, type BreakerPass } from './circuit-breaker.js';
import type { ExecutionOutcome, RetryRecord } from './execution-outcome.js';
import { countsAgainstBreaker, decisiveFailure, errorCodeFor, isPoll, isRetryable, refusedInput } from './failure-mapping.js';
import { retryDelayMs } from './retry-math.js';

type Failure = Extract<VendorOutcome, { ok: false }>;

/** A call whose action changes something at the vendor. */
const isWrite = (req: ExecuteRequest): boolean => req.entry.action.sideEffect === 'write';

/** The org's config for this call, and the stamp of the stored row it came from (CredentialsService.stampOf). */
interface HeldCredentials {
  config: Record<string, unknown>;
  stamp: string;
  /** CredentialsService.loadStamped's generation: a change answered in this process after it is seen without the database. */
  generation?: number;
}

/** The vendor answered this attempt (a status), or its request may have left: the write may have been made. */
const mayHaveSent = (f: Failure): boolean => f.requestSent || f.vendorStatus !== undefined;
/** That, or an earlier request of the attempt reached the vendor (a refund's order read): it counts as a vendor call. */
const reachedVendor = (f: Failure): boolean => mayHaveSent(f) || f.readSent === true;

/** Where the attempts stand, for an exception: a handler in flight may have sent its request. */
interface Progress {
  failures: Failure[];
  inHandler: boolean;
  /** The access tokens the call's attempts were handed (VendorCallContext.tokensUsed), redacted by value from the answer. */
  tokensUsed: Set<string>;
}

export interface ExecuteRequest {
  entry: CatalogEntry;
  orgId: string;
  toolCallId: string;
  idempotencyKey: string;
  params: Record<string, unknown>;
}

const BACKOFF = { baseMs: 100, maxMs: 2_000 };

/**
 * Runs one vendor action: credentials, circuit breaker, timeout, retries of
 * idempotent actions, error mapping. Expected failures come back as outcomes;
 * an exception anywhere becomes EXECUTION_ERROR — a tool never crashes the
 * gateway or the run.
 */
@Injectable()
export class RuntimeToolExecutor {
  private readonly log = new Logger('Executor');
  /** Per org × vendor, with the stamp of the credentials the breaker's calls were made with (see breakerFor). */
  private readonly breakers = new Map<string, { breaker: CircuitBreaker; stamp: string | null }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly clock: Clock,
    private readonly metrics: MetricsService,
    // The run's and the kill switch's state before a send that waited (sendStanding); absent in specs built by hand.
    @Optional() private readonly sql?: Sql,
  ) {
    // Credentials replaced or deleted through this replica: the org's breaker for that vendor goes at once, as it would
    // at the next call (breakerFor), so /metrics stops reporting an outage the fix already ended. The same credentials
    // saved again (the same stamp) keep it. (Hand-built executors of unit specs have no change feed.)
    if (typeof credentials.onChange === 'function') credentials.onChange((orgId, type, stamp) => this.credentialsChanged(orgId, type, stamp));
    metrics.onScrape(() => {
      this.metrics.breakerState.reset();
      for (const [key, n] of this.breakerCounts()) {
        const [vendor, state] = key.split('|');
        this.metrics.breakerState.set({ vendor, state }, n);
      }
    });
  }

  /**
   * The org × vendor breaker. Given the stamp of the credentials a call is about to use: a breaker whose failures came
   * under other credentials (an admin replaced a wrong shop domain or connection) starts again closed, so the fix is
   * not answered CIRCUIT_OPEN for the rest of a cooldown that only the old credentials earned. A key rotation changes
   * stamps too, which at worst lets one more round of calls find a vendor still down. Without a stamp (a caller that
   * only asks whether the breaker refuses), the breaker as it stands.
   */
  breakerFor(orgId: string, vendor: VendorKey, stamp?: string): CircuitBreaker {
    const key = `${orgId}:${vendor}`;
    const held = this.breakers.get(key);
    if (held && (stamp === undefined || held.stamp === stamp)) return held.breaker;
    // Replaced (one made without a stamp has no history: only calls, which give theirs, report to a breaker).
    if (held?.breaker.refusing) {
      this.log.log({ orgId, vendor }, 'circuit breaker reset: the org\'s credentials for the vendor were replaced since it opened');
    }
    const breaker = new CircuitBreaker(this.config.CIRCUIT_BREAKER_THRESHOLD, this.config.CIRCUIT_BREAKER_COOLDOWN_MS, () => this.clock.elapsedMs());
    this.breakers.set(key, { breaker, stamp: stamp ?? null });
    return breaker;
  }

  private credentialsChanged(orgId: string, vendor: VendorKey, stamp: string | null | undefined): void {
    const key = `${orgId}:${vendor}`;
    const held = this.breakers.get(key);
    if (stamp === undefined || !held || held.stamp === null || held.stamp === stamp) return;
    if (held.breaker.refusing) this.log.log({ orgId, vendor }, 'circuit breaker reset: the org\'s credentials for the vendor were replaced since it opened');
    this.breakers.delete(key);
  }

  /**
   * An org's calls to a vendor are refused from now on (CIRCUIT_OPEN) until the cooldown has passed: the one line
   * that says which org, which vendor and why, where the request log only shows 200s (tool results) either side.
   */
  private breakerOpened(req: ExecuteRequest, cause: Failure): void {
    this.log.warn(
      {
        orgId: req.orgId,
        vendor: req.entry.vendor,
        toolCallId: req.toolCallId,
        cause: cause.kind,
        vendorStatus: cause.vendorStatus ?? null,
        cooldownMs: this.config.CIRCUIT_BREAKER_COOLDOWN_MS,
      },
      'circuit breaker opened: this org\'s calls to the vendor are answered CIRCUIT_OPEN until the cooldown has passed, then one probe is let through',
    );
  }

  /**
   * A write that may have happened: somebody has to find out (POST /v1/tool-calls/:id/reconcile). The one line that
   * names it, where the request log shows a 200 like any other tool result. `why`: the decisive failure, when known.
   */
  private outcomeUnknown(req: ExecuteRequest, why: { cause?: string; vendorStatus?: number | null }): void {
    this.log.warn(
      { toolCallId: req.toolCallId, orgId: req.orgId, vendor: req.entry.vendor, tool: req.entry.tool.name, action: req.entry.action.name, ...why },
      'write outcome unknown: the call is indeterminate until an operator reconciles it with the vendor',
    );
  }

  private breakerClosed(req: ExecuteRequest): void {
    this.log.log({ orgId: req.orgId, vendor: req.entry.vendor, toolCallId: req.toolCallId }, 'circuit breaker closed: the probe call succeeded');
  }

  /**
   * Breaker states by vendor, for /metrics: only breakers refusing calls now (open within the cooldown, or half-open
   * with its probe out), so any series above 0 is trouble. One past its cooldown that no call has probed is not: it
   * lets the next call through, and an org that stopped calling would otherwise keep the series up for good.
   */
  breakerCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [key, { breaker: b }] of this.breakers) {
      if (!b.refusing) continue;
      const state = b.current;
      const k = `${key.slice(key.indexOf(':') + 1)}|${state}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    return counts;
  }

  async execute(req: ExecuteRequest): Promise<ExecutionOutcome> {
    const started = performance.now();
    const retries: RetryRecord[] = [];
    const done = (
      o: Omit<Extract<ExecutionOutcome, { status: 'failed' | 'indeterminate' }>, 'retries' | 'durationMs' | 'vendorReached'>,
      vendorReached: boolean,
    ): ExecutionOutcome => ({
      ...o,
      vendorReached,
      retries,
      durationMs: Math.round(performance.now() - started),
    });
    // A breaker this call acquired and has not yet reported to (released if the call throws).
    let pending: { breaker: CircuitBreaker; pass: BreakerPass } | undefined;
    const progress: Progress = { failures: [], inHandler: false, tokensUsed: new Set() };
    try {
      let credentials: HeldCredentials | null;
      try {
        // A write's from the database itself: a DELETE or PUT another replica has answered is in force for it at once,
        // as a flag or policy change is (a read may use this replica's copy, up to 1 s old).
        credentials = await this.credentials.loadStamped(req.orgId, req.entry.vendor, isWrite(req));
      } catch (err) {
        if (err instanceof DecryptionError) {
          // Answered CREDENTIALS_INVALID like a vendor's 401, but the fix is not the same: a master key missing from
          // this replica (a deploy with the wrong MASTER_ENCRYPTION_KEY, README "Rotating the master key") fails
          // every call of every org this way, and re-entering the credentials would seal them under the wrong key.
          this.log.warn(
            { toolCallId: req.toolCallId, orgId: req.orgId, vendor: req.entry.vendor },
            'stored credentials could not be decrypted with the master keys this replica has loaded (a wrong or missing MASTER_ENCRYPTION_KEY, or a damaged row): the call failed CREDENTIALS_INVALID without reaching the vendor',
          );
          return done({ status: 'failed', errorCode: 'CREDENTIALS_INVALID', errorText: 'stored credentials could not be decrypted', vendorStatus: null }, false);
        }
        if (isDatabaseUnavailable(err)) {
          // The gateway's own database, before anything left: a new call may work (as a token store or a refund
          // lease failing), not "the tool failed unexpectedly" and a bug's error line.
          this.log.warn(
            { toolCallId: req.toolCallId, orgId: req.orgId, vendor: req.entry.vendor, ...failedStatementFields(err) },
            'credentials could not be loaded (database unavailable): the call failed without reaching the vendor',
          );
          return done(
            { status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: 'the credentials could not be loaded (the database is unavailable); nothing was sent', vendorStatus: null, vendorRefused: false },
            false,
          );
        }
        throw err;
      }
      if (!credentials) {
        return done({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND', errorText: `no ${req.entry.vendor} credentials for this org`, vendorStatus: null }, false);
      }
      const breaker = this.breakerFor(req.orgId, req.entry.vendor, credentials.stamp);
      const pass = breaker.tryAcquire();
      if (!pass) {
        return done({ status: 'failed', errorCode: 'CIRCUIT_OPEN', errorText: `${req.entry.vendor} circuit breaker is open`, vendorStatus: null }, false);
      }
      pending = { breaker, pass };
      const { failures } = progress;
      const outcome = await this.callWithRetries(req, credentials, retries, progress, started, pass.probe);
      pending = undefined;
      // The org's secrets, by value, out of what the vendor's answer carries (credential-values.ts): an answer echoing
      // the key it was sent (of no shape the redaction knows) would reach the agent, the encrypted result and the
      // ledger's copy, all made from what is returned here. So are the access tokens bought with them and sent: the
      // agent's result is not shape-redacted. A few native searches per string of the answer.
      const secrets = credentialSecretForms(credentials.config, progress.tokensUsed);
      if (outcome.ok) {
        if (breaker.onSuccess(pass)) this.breakerClosed(req);
        const result = redactCredentialValues(outcome.data, secrets);
        return { status: 'succeeded', result, vendorStatus: outcome.vendorStatus, vendorReached: true, retries, durationMs: Math.round(performance.now() - started) };
      }
      // Not always the last attempt: one that may have taken effect earlier keeps a write unknown.
      const attempts = failures.at(-1) === outcome ? failures : [...failures, outcome];
      const decisive = decisiveFailure(attempts, req.entry.action);
      const errorCode = errorCodeFor(decisive, req.entry.action);
      // A connect failure or a budget spent before the first send on every attempt: nothing reached the vendor.
      const vendorReached = attempts.some(reachedVendor);
      const namedWaitMs = decisive.kind === 'rate_limited' ? vendorNamedWaitMs(decisive) : undefined;
      if (countsAgainstBreaker(outcome)) {
        if (breaker.onFailure(pass)) this.breakerOpened(req, outcome);
      }
      else if (outcome.kind === 'rate_limited') breaker.onRateLimited(pass);
      // A call that never reached the vendor (a path refused before sending, a busy refund lease, the gateway's
      // own token store) says nothing of its health: it must not close a half-open breaker, nor reset the count.
      else if (!vendorReached) breaker.onAbandoned(pass);
      else if (breaker.onNeutral(pass)) this.breakerClosed(req);
      if (errorCode === 'OUTCOME_UNKNOWN') this.outcomeUnknown(req, { cause: decisive.kind, vendorStatus: decisive.vendorStatus ?? null });
      return done(
        {
          status: errorCode === 'OUTCOME_UNKNOWN' ? 'indeterminate' : 'failed',
          errorCode,
          errorText: redactCredentialValuesInText(decisive === outcome ? outcome.message : `${decisive.message}; then: ${outcome.message}`, secrets).slice(0, 500),
          vendorStatus: outcome.vendorStatus ?? null,
          vendorRefused: refusedInput(decisive),
          // Only a wait the vendor named (API.md), never the default a handler slept on. Clamped again here:
          // whatever a handler computed, the ledger's integer column and the agent get at most a day.
          ...(namedWaitMs !== undefined ? { retryAfterSeconds: Math.ceil(clampRetryAfterMs(namedWaitMs)! / 1000) } : {}),
        },
        vendorReached,
      );
    } catch (err) {
      pending?.breaker.onAbandoned(pending.pass);
      // A bug: its stack (redacted message, frames) and whose call it was; the request's correlation id comes with the line's bindings.
      this.log.error(
        { toolCallId: req.toolCallId, orgId: req.orgId, vendor: req.entry.vendor, tool: req.entry.tool.name, action: req.entry.action.name, err: loggableErrorWithStack(err) },
        'tool execution threw',
      );
      // A handler that threw may have sent its request: that counts as sent. An
      // exception before any request (loading credentials, say) sent nothing.
      const sent = progress.inHandler || progress.failures.some(mayHaveSent);
      // A refund's order read reached the vendor, its mutation never left: charged, yet certainly not made.
      const reached = sent || progress.failures.some(reachedVendor);
      // A write that threw after it may have been sent cannot be called failed with certainty.
      const unknown = req.entry.action.sideEffect === 'write' && sent;
      if (unknown) this.outcomeUnknown(req, {});
      return done(
        {
          status: unknown ? 'indeterminate' : 'failed',
          errorCode: unknown ? 'OUTCOME_UNKNOWN' : 'EXECUTION_ERROR',
          errorText: sent
            ? 'the tool failed unexpectedly'
            : `the tool failed unexpectedly before ${reached ? 'its write' : 'anything'} was sent to the vendor`,
          vendorStatus: null,
        },
        reached,
      );
    }
  }

  /**
   * `progress.failures` receives every failed attempt, in order; `progress.inHandler` is true while an attempt runs.
   * The budget runs from `startedAt`, when execution began: time spent loading credentials is spent from it, so
   * no request leaves after VENDOR_TIMEOUT_MS (the orphan sweeper presumes a call that old has ended).
   * A half-open breaker's `probe` is one attempt: retries would turn the one call it lets through into a burst
   * against a vendor that may still be down.
   */
  private async callWithRetries(
    req: ExecuteRequest,
    credentials: HeldCredentials,
    retries: RetryRecord[],
    progress: Progress,
    startedAt: number,
    probe: boolean,
  ): Promise<VendorOutcome> {
    const { entry } = req;
    const deadline = startedAt + this.config.VENDOR_TIMEOUT_MS;
    const left = deadline - performance.now();
    if (left <= 0) {
      // The gateway's own slowness (its database): nothing was sent, and it says nothing of the vendor's health.
      const spent = { ...fail('timeout', 'the call\'s time budget was spent before its request was sent', undefined, undefined, false), local: true };
      progress.failures.push(spent);
      return spent;
    }
    const signal = AbortSignal.timeout(Math.ceil(left));
    const cap = this.config.VENDOR_RETRY_AFTER_CAP_MS;
    const maxRetries = entry.action.idempotent && !probe ? this.config.VENDOR_MAX_RETRIES : 0;
    // A wait the vendor asked for that outlasts the call's budget is not slept on: after a 429 it is handed back
    // to the agent (VENDOR_RATE_LIMITED + retryAfterSeconds), after a 5xx the call ends VENDOR_ERROR.
    // A retry (a read's, a write's after a refusal) needs a quarter of the budget left when it leaves, as a
    // handler's write after a token wait (writeSendRoomMs): sent with less, its answer would likely come past the
    // deadline, and the call end as the gateway's own timeout though the vendor had answered every attempt promptly:
    // a read's 429 reported VENDOR_TIMEOUT without its Retry-After and held against the breaker (which a rate limit
    // never opens), a write's clean refusal indeterminate. The previous answer is the better one then.
    const retryRoom = writeSendRoomMs(this.config.VENDOR_TIMEOUT_MS);
    // Attempts made so far (the next one's VendorCallContext.attempt), the last one's failure, and how long it took.
    let attempt = 0;
    let last: Failure | undefined;
    let lastAttemptMs = 0;
    // An "in progress" poll asks after the same request, and may pick up its result (the call is unknown without
    // it): it goes with room for the vendor to answer as it just did, twice the last attempt's time (at least
    // SEND_FLOOR_MS, at most the quarter), not with the floor alone, which left it to the gateway's deadline.
    const roomFor = (f: Failure | undefined): number =>
      f && isPoll(f) ? Math.min(retryRoom, Math.max(SEND_FLOOR_MS, 2 * lastAttemptMs)) : retryRoom;
    // Polls of an "in progress" answer are bounded by the budget alone: the
    // request under that key may complete, and then the vendor hands back its
    // result. Every other retry counts against VENDOR_MAX_RETRIES.
    let failureRetries = 0;
    // Set when the call ends on an earlier attempt's failure (credentials changed): that failure is not retried again.
    let ended = false;
    // The sleep before the retry shouldRetry allowed, drawn there with its jitter (retryDelayMs): the room is judged
    // on the whole sleep, not on the vendor's wait alone, which the jitter (up to BACKOFF.maxMs) comes on top of.
    let nextDelayMs = 0;
    const shouldRetry = (f: Failure): boolean => {
      if (ended || !isRetryable(f, entry.action, cap) || !(isPoll(f) || failureRetries < maxRetries)) return false;
      nextDelayMs = retryDelayMs(attempt, f.retryAfterMs, BACKOFF);
      return performance.now() + nextDelayMs + roomFor(f) < deadline;
    };
    const policy = retry(
      handleWhenResult((r) => !(r as VendorOutcome).ok && shouldRetry(r as Failure)),
      {
        // Bounded by shouldRetry and the call's time budget (the signal).
        maxAttempts: Number.POSITIVE_INFINITY,
        // cockatiel asks for the delay right after shouldRetry allowed the retry: the one drawn there. Never past the
        // call's budget (the sleep does not heed the signal); a late wake-up then finds no room (below).
        backoff: new DelegateBackoff(() => Math.max(0, Math.min(nextDelayMs, deadline - performance.now()))),
      },
    );
    policy.onRetry((e) => {
      const last = 'value' in e ? (e.value as Failure) : undefined;
      if (!last || !isPoll(last)) failureRetries++;
      retries.push({ attempt: e.attempt, delayMs: Math.round(e.delay), reason: last?.kind ?? 'error' });
    });
    const scratch = new Map<string, unknown>();
    const generation = credentials.generation;
    return policy.execute(async () => {
      // Credentials replaced or deleted while this call waited to retry: it ends as the attempt before did (its
      // scheduled retry not counted), and sends neither config. Not the old one: a change answered to the admin is
      // in force from then on. Nor the new one: it may name another shop or account, where this request was never
      // sent — that is not a retry. Nor is a retry sent once the run ended or the org's kill switch was thrown during
      // its wait (a Retry-After slept on): both were answered 200 "nothing new executes", and the retry went out a
      // second later; an "in progress" poll goes on, which under the same key can only pick up the original. Checked
      // before the budget, so the time the lookups take is spent from it.
      if (attempt > 0 && last && !signal.aborted && (await this.sendStanding(req, credentials, !isPoll(last))) !== 'allowed') {
        retries.pop();
        ended = true;
        return last;
      }
      // The budget ran out, or the room a retry needs, during a backoff (a wake-up late on a busy event loop, the
      // lookups above): this attempt never leaves, so its scheduled retry is not counted. Answer with the previous
      // attempt's failure, which was retried only because it was transient and, for a write, because the vendor
      // answered it (429, 5xx, "in progress") or it never left — calling that "sent, answer lost" would make a
      // refusal look indeterminate (an "in progress" stays unknown on its own), and a 429 a timeout. Decided on the
      // clock, not on which timer fired first: the sleep's and the budget's may fall due together.
      if (signal.aborted || (attempt > 0 && deadline - performance.now() < roomFor(last))) {
        if (attempt > 0) retries.pop();
        return last ?? ({ ok: false, kind: 'timeout', requestSent: false, message: 'vendor call timed out before it was sent' } satisfies Failure);
      }
      progress.inHandler = true;
      const attemptStarted = performance.now();
      const { result: outcome, ms: atVendorMs, exchanges } = await timeVendorExchanges(() => entry.handler.execute({
        orgId: req.orgId,
        toolCallId: req.toolCallId,
        idempotencyKey: req.idempotencyKey,
        toolName: entry.tool.name,
        action: entry.action.name,
        params: req.params,
        credentials: credentials.config,
        signal,
        deadline,
        attempt: attempt++,
        scratch,
        tokensUsed: progress.tokensUsed,
        sendStanding: () => this.sendStanding(req, credentials, true),
        ...(generation !== undefined ? { credentialsCurrent: () => this.credentials.unchangedSince(req.orgId, req.entry.vendor, generation) } : {}),
      }));
      progress.inHandler = false;
      lastAttemptMs = performance.now() - attemptStarted;
      // An attempt that ended in the gateway's own trouble (its database, another call's lease) is not a vendor
      // answer: counted here it read as the vendor's network errors or timeouts on the dashboards. Nor is the time an
      // attempt spent waiting in the gateway: only its exchanges with the vendor are timed (timeVendorExchanges).
      if (exchanges > 0 && (outcome.ok || !outcome.local)) {
        this.metrics.vendorLatency.observe({ vendor: entry.vendor, outcome: outcome.ok ? 'ok' : outcome.kind }, atVendorMs / 1000);
      }
      if (!outcome.ok) {
        last = outcome;
        progress.failures.push(outcome);
      }
      return outcome;
    }, signal);
  }

  /**
   * Whether a send that waited may still go (VendorCallContext.sendStanding): the org still stores the credentials the
   * call loaded, and (`judgeRun`) its run has not ended and the org's tool_calling_enabled is still on. 'unknown' when a
   * check failed (logged): the send is not made.
   */
  private async sendStanding(req: ExecuteRequest, held: HeldCredentials, judgeRun: boolean): Promise<SendStanding> {
    const credentials = await this.credentialsState(req, held);
    if (credentials !== 'held') return credentials === 'changed' ? 'credentials-changed' : credentials === 'deleted' ? 'credentials-deleted' : 'unknown';
    return judgeRun ? this.runStanding(req) : 'allowed';
  }

  /**
   * The call's run not ended and the org's tool_calling_enabled still on, read now; 'unknown' when the read failed
   * (logged). A call with no row (none in specs that run the executor alone) has nothing to judge it by.
   */
  private async runStanding(req: ExecuteRequest): Promise<SendStanding> {
    if (!this.sql) return 'allowed';
    try {
      const [row] = await this.sql.prepared<{ live: boolean; enabled: boolean }>(
        `SELECT r.status IN ('running', 'waiting_approval') AS live,
                COALESCE((SELECT f.enabled FROM feature_flags f WHERE f.org_id = tc.org_id AND f.flag = 'tool_calling_enabled'), false) AS enabled
           FROM tool_calls tc JOIN agent_runs r ON r.id = tc.run_id WHERE tc.id = $1`,
        [req.toolCallId],
      );
      if (!row) return 'allowed';
      return !row.live ? 'run-ended' : row.enabled ? 'allowed' : 'disabled';
    } catch (err) {
      this.log.warn({ toolCallId: req.toolCallId, err: loggableErrorText(err) }, "the call's run and flag could not be checked before sending");
      return 'unknown';
    }
  }

  /**
   * Whether the org still stores the config this call loaded; 'unknown' when the lookup failed (logged). The stamp is
   * a fingerprint keyed by the active master key, so a key rotation (credentials:rotate, or a PUT of the same config
   * from a replica with another active key) changes it though the config is the same: on another stamp the stored
   * config is decrypted and compared before the call is told it changed (rare: only after a PUT, DELETE or rotation).
   */
  private async credentialsState(req: ExecuteRequest, held: HeldCredentials): Promise<'held' | 'changed' | 'deleted' | 'unknown'> {
    try {
      const stamp = await this.credentials.stampOf(req.orgId, req.entry.vendor, isWrite(req));
      if (stamp === held.stamp) return 'held';
      if (stamp === null) return 'deleted';
      const now = await this.credentials.loadStamped(req.orgId, req.entry.vendor, isWrite(req)).catch((err: unknown) => {
        if (err instanceof DecryptionError) return 'sealed' as const; // under a key this replica lacks: not a config it can hold
        throw err;
      });
      if (now === null) return 'deleted';
      if (now === 'sealed' || canonicalJson(now.config) !== canonicalJson(held.config)) return 'changed';
      held.stamp = now.stamp; // the same config, re-sealed: later checks compare stamps again
      return 'held';
    } catch (err) {
      this.log.warn({ toolCallId: req.toolCallId, err: loggableErrorText(err) }, 'credentials could not be checked before sending');
      return 'unknown';
    }
  }
}
