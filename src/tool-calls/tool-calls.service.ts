import { Inject, Injectable } from '@nestjs/common';
import { ApiKeysService } from '../auth/api-keys.service.js';
import type { Principal } from '../auth/principal.js';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { actionDigest, unkeyedActionDigest } from '../common/canonical-json.js';
import { Clock } from '../common/clock.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { AppError } from '../common/errors/app-error.js';
import { isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { newId } from '../common/ids.js';
import { storableText } from '../common/storable-text.js';
import { retryWhileUnavailable } from '../common/errors/unavailable-retry.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { notSentOutcome, type ExecutionOutcome } from '../executor/execution-outcome.js';
import { RuntimeToolExecutor } from '../executor/runtime-tool-executor.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { FeatureFlagsService } from '../orgs/feature-flags.service.js';
import { OrgDigestKeys } from '../orgs/org-digest-keys.js';
import { PoliciesService } from '../policy/policies.service.js';
import { redactInput } from '../redaction/redaction.service.js';
import { shownExactly } from '../redaction/shown-exactly.js';
import { RunsService } from '../runs/runs.service.js';
import { countToolCall } from './count-tool-call.js';
import { OutcomeRecorder, recordedTool, type ExecutedCall } from './outcome-recorder.js';
import type { StoredCall } from './stored-call.js';
import { conflictWithoutRow, StoredCallAnswers, type CallDigest } from './stored-call-answers.js';
import { decide } from './tool-call-decision.js';
import { buildToolCallBody, httpStatusFor } from './tool-call-body.js';
import { ToolCallLedger, type IntentResult } from './tool-call-ledger.js';
import { assertTransition } from './tool-call-lifecycle.js';
import { recordedAction, recordedToolName } from './recorded-action.js';
import { respond, type ToolCallResponse } from './tool-call-response.js';
import { credentialInIdentifiers, idempotencyKeyFor, parseToolUse } from './tool-use.js';
import { VendorAdmission } from './vendor-admission.js';

export { recordedTool, type RecordedTool } from './outcome-recorder.js';
export { settledCalls, STORED_CALL_COLUMNS, type StoredCall } from './stored-call.js';
export type { ToolCallResponse } from './tool-call-response.js';

/** Who a replay is for: the key (whose runs it reaches, and which pays for it), and whether it is a batch's item. */
const replayer = (p: Principal, orgId: string) => ({ orgId, keyId: p.keyId, role: p.role, batchItem: p.batchItem === true });

export const inputAad = (orgId: string, toolCallId: string): string => `input:${orgId}:${toolCallId}`;

/** A platform key (orgId null) on an agent route (single call or batch). */
export const PLATFORM_KEY_REFUSED = "tool calls are made with an agent or admin key of the run's org; a platform key (orgId null) belongs to no org";

/** A batch item after one still executing: not started (see ToolCallBatchService). */
function heldBehindEarlierItem(): AppError {
  return new AppError('IDEMPOTENCY_IN_PROGRESS', 'an earlier tool_use of this batch is still executing, so this one was not started; send the batch again shortly', {
    retryAfterSeconds: 1,
  });
}

/** How long an intent write is sent again while the database is unavailable (far below the orphan sweep's margin). */
const INTENT_WRITE_RETRY_MS = 3_000;

/** The error text of a call recorded, then stopped before it was sent (IntentResult 'recorded-then-stopped'). */
export const STOPPED_WHILE_RECORDED_TEXT =
  "not sent to the vendor: the run ended, the org's tool calling was turned off, its policy changed or the API key was revoked while the call was being recorded; send it again under a new tool_use id if it should still run";

/** Decisions made again after the intent found the flag or policy changed (each time on fresh reads); more is a storm of admin changes. */
const GOVERNANCE_REDECIDE_MAX = 3;

/**
 * The governed tool call (ARCHITECTURE.md "The pipeline"): parse → run →
 * governance decision → ONE statement reserving the idempotency key and
 * recording the intent → vendor call outside any transaction → ONE statement
 * recording the outcome → tool_result.
 */
@Injectable()
export class ToolCallsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RunsService,
    private readonly flags: FeatureFlagsService,
    private readonly catalog: ToolCatalogService,
    private readonly policies: PoliciesService,
    private readonly ledger: ToolCallLedger,
    private readonly executor: RuntimeToolExecutor,
    private readonly answers: StoredCallAnswers,
    private readonly outcomes: OutcomeRecorder,
    private readonly admission: VendorAdmission,
    private readonly cipher: EnvelopeCipher,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    private readonly keys: ApiKeysService,
    private readonly digestKeys: OrgDigestKeys,
  ) {}

  async submit(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown, correlationId: string, attempt = 0): Promise<ToolCallResponse> {
    const { orgId, use, run, idempotencyKey, callDigest } = await this.identify(p, runId, body, idempotencyHeader);
    const digest = callDigest.keyed;
    // The one form of the model's tool name and action that reaches the row, the events and the metrics (see recorded-action.ts).
    const toolName = recordedToolName(use.name, this.catalog);
    const action = recordedAction(use.name, use.action, this.catalog);
    // An ended run takes no new calls; a call it made before it ended is still answered (the agent may resend after a lost answer).
    if (run.status !== 'running' && run.status !== 'waiting_approval') {
      await this.keyChecked(p, this.answers.assertKeyLive(p.keyId)); // no intent statement on this path to re-check the key
      return await this.answers.replayByKey(replayer(p, orgId), { runId: run.id, idempotencyKey }, callDigest, use.id, () => this.answers.runEnded(run.id));
    }

    // A new call only: one stored under these identifiers before they were refused is replayed as any other.
    const credential = credentialInIdentifiers(use.id, idempotencyHeader);
    if (credential) {
      await this.keyChecked(p, this.answers.assertKeyLive(p.keyId)); // no intent statement on this path to re-check the key
      return await this.answers.replayByKey(replayer(p, orgId), { runId: run.id, idempotencyKey }, callDigest, use.id, () => credential);
    }

    const [flagEnabled, { rules, version: policyVersion }] = await Promise.all([this.flags.isEnabled(orgId, 'tool_calling_enabled'), this.policies.rulesFor(orgId)]);
    const decision = decide({
      flagEnabled,
      toolName: use.name,
      action: use.action,
      params: use.params,
      allowedTools: run.allowedTools,
      find: (t, a) => this.catalog.find(t, a),
      checkParams: (e, prm) => this.catalog.checkParams(e, prm),
      rules,
    });

    let release: (() => void) | null = null;
    if (decision.status === 'running') {
      release = this.leaseFor(orgId, decision.entry.vendor);
      if (!release) return this.keyChecked(p, this.admission.concurrencyLimited(orgId, { keyId: p.keyId, role: p.role }, run.id, idempotencyKey, callDigest, use.id, decision.entry, p.batchItem === true));
    }
    try {
      const id = newId();
      const policyDecisionId = 'policy' in decision && decision.policy ? newId() : null;
      const status = decision.status;
      assertTransition('requested', status);
      const errorCode = status === 'blocked' || status === 'failed' ? decision.errorCode : null;
      // INVALID_INPUT names the model's parameter, redacted by the catalog (checkParams); NOT_IN_MANIFEST names the run's actions of the tool.
      const errorText = 'errorText' in decision ? storableText(decision.errorText) : null;
      const entry = decision.entry;
      const facts = { toolName, action, digest };
      const actor = { keyId: p.keyId, role: p.role };
      const events: NewLedgerEvent[] = [{ orgId, type: 'tool_call.requested', runId: run.id, toolCallId: id, actor, metadata: facts }];
      if (status === 'blocked') {
        const reason = { FEATURE_DISABLED: 'feature_disabled', NOT_IN_MANIFEST: 'not_in_manifest', POLICY_BLOCKED: 'policy' }[decision.errorCode];
        events.push({ orgId, type: 'tool_call.blocked', runId: run.id, toolCallId: id, actor, metadata: { ...facts, errorCode, reason, ruleId: decision.policy?.ruleId ?? null } });
      } else if (status === 'failed') {
        events.push({ orgId, type: 'tool_call.failed', runId: run.id, toolCallId: id, actor, metadata: { ...facts, errorCode } });
      } else if (status === 'waiting_approval') {
        events.push({ orgId, type: 'tool_call.approval_requested', runId: run.id, toolCallId: id, actor, metadata: { ...facts, kind: decision.approvalKind, riskLevel: decision.policy.riskLevel, ruleId: decision.policy.ruleId } });
      } else {
        events.push({ orgId, type: 'tool_call.started', runId: run.id, toolCallId: id, actor, metadata: { ...facts, vendor: decision.entry.vendor } });
      }
      const policy = 'policy' in decision && decision.policy ? decision.policy : null;
      const inputRedacted = redactInput(use.params);
      const approval =
        decision.status === 'waiting_approval'
          ? {
              id: newId(),
              kind: decision.approvalKind,
              reason: decision.policy.reason,
              riskLevel: decision.policy.riskLevel,
              expiresAt: new Date(this.clock.nowMs() + this.config.APPROVAL_TTL_SECONDS * 1000),
              input: this.cipher.encryptJson(use.params, inputAad(orgId, id)),
              inputShownExactly: shownExactly(use.params, inputRedacted),
            }
          : null;
      // Sent again while the database is briefly unavailable: an attempt that committed with its answer lost is
      // found as this call's own row (writeIntent), so the call is recorded once and still runs.
      let sends = 0;
      const intent = retryWhileUnavailable(() => this.ledger.writeIntent(
        {
          id, orgId, runId: run.id, specialistId: run.specialistId, toolName, action, vendor: entry?.vendor ?? null,
          status, errorCode, errorText, httpStatus: httpStatusFor(status, errorCode), correlationId, idempotencyKey, toolUseId: use.id,
          actionDigest: digest, inputRedacted, riskLevel: policy?.riskLevel ?? entry?.action.riskLevel ?? null,
          policyDecisionId, actorKeyId: p.keyId, decidedOn: { flagEnabled, policyVersion },
          staleAfterMs: this.config.VENDOR_TIMEOUT_MS + this.config.STALE_RUNNING_MARGIN_MS,
        },
        events,
        policy && policyDecisionId ? { id: policyDecisionId, ...policy } : null,
        approval,
        sends++ > 0,
      ), { budgetMs: INTENT_WRITE_RETRY_MS, capMs: 500 });
      if (release) this.admission.trackIntent([`${orgId}:${idempotencyKey}`, `${run.id}:${use.id}`], intent);
      let written: IntentResult;
      try {
        written = await intent;
      } catch (err) {
        // Answered 503 without calling the vendor: an attempt that committed with its answer lost left a `running`
        // row, settled as not sent once the database is back (not left for the sweep to call "indeterminate").
        if (status === 'running' && isDatabaseUnavailable(err)) {
          this.outcomes.recordUnsent({ id, orgId, runId: run.id, tool: recordedTool(decision.entry), toolUseId: use.id, digest, from: 'running', actor });
        }
        throw err;
      }
      if (written === 'key-revoked') {
        this.keys.refused(p);
        throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
      }
      if (written === 'run-ended' || written === 'exists') {
        // A replay calls no vendor: the slot goes back before the stored answer is read (and its result decrypted),
        // not held meanwhile against the org's new calls.
        release?.();
        release = null;
        const none = written === 'run-ended' ? () => this.answers.runEnded(run.id) : conflictWithoutRow;
        return await this.answers.replayByKey(replayer(p, orgId), { runId: run.id, idempotencyKey }, callDigest, use.id, none);
      }
      if (written === 'governance-changed') {
        // Changed on another replica inside this one's cache window: decide again on fresh reads, the lease given back first.
        this.flags.forget(orgId);
        this.policies.forget(orgId);
        release?.();
        release = null;
        if (attempt >= GOVERNANCE_REDECIDE_MAX) {
          // Nothing recorded, and the client is told to send it again: when, as every other answer asking for a retry says.
          throw new AppError('CONFLICT', "the organization's flag or policy kept changing while this call was decided; send it again", { retryAfterSeconds: 1 });
        }
        return await this.submit(p, runId, body, idempotencyHeader, correlationId, attempt + 1);
      }
      if (status !== 'running') {
        this.count(toolName, action, status, errorCode);
        const facts2 = { id, status, errorCode, errorText, retryAfterSeconds: null, approvalKind: approval?.kind ?? null };
        return respond(buildToolCallBody(facts2, { found: false }, use.id, false, this.config.RESULT_BUDGET_BYTES), httpStatusFor(status, errorCode), false);
      }
      const runEntry = decision.entry;
      if (written === 'recorded-then-stopped') {
        // Recorded by an attempt whose answer was lost; a run end, kill switch, revocation or policy change answered
        // before the resend found it is in force: settled as not sent (EXECUTION_ERROR, no cost), never sent.
        release?.();
        release = null;
        const outcome = notSentOutcome(STOPPED_WHILE_RECORDED_TEXT, { passing: true });
        return await this.recordOutcome({ id, orgId, runId: run.id, tool: recordedTool(runEntry), toolUseId: use.id, digest, from: 'running', actor }, outcome);
      }
      // Tracked: a shutdown waits for it even when the client has gone (the vendor acts all the same).
      return await this.ledger.track(
        (async () => {
          const outcome = await this.executor.execute({ entry: runEntry, orgId, toolCallId: id, idempotencyKey, params: use.params });
          // The lease counts calls at the vendor: give it back before the outcome commit.
          release?.();
          release = null;
          return await this.recordOutcome({ id, orgId, runId: run.id, tool: recordedTool(runEntry), toolUseId: use.id, digest, from: 'running', actor }, outcome);
        })(),
      );
    } finally {
      release?.();
    }
  }

  /** A slot of the org × vendor concurrency limit, or null when it is full (see VendorAdmission.leaseFor). */
  leaseFor(orgId: string, vendor: string, approvedCall?: string): (() => void) | null {
    return this.admission.leaseFor(orgId, vendor, approvedCall);
  }

  /**
   * An approved call found the org × vendor full: new calls there are refused until it takes a slot (at most `forMs`);
   * `wake` is called when a slot there is given back meanwhile.
   */
  reserveFor(orgId: string, vendor: string, forMs: number, toolCallId: string, wake?: () => void): void {
    this.admission.reserveFor(orgId, vendor, forMs, toolCallId, wake);
  }

  /** The approved call no longer waits for a slot: a slot kept for it alone is given back to new calls. */
  unreserve(toolCallId: string): void {
    this.admission.unreserve(toolCallId);
  }

  /** The approved calls slots are kept for in this process. */
  reservationHolders(): string[] {
    return this.admission.reservationHolders();
  }

  /** Writes the outcome of an executed call and answers with the tool-call body. Also used by approvals. */
  recordOutcome(c: ExecutedCall, outcome: ExecutionOutcome): Promise<ToolCallResponse> {
    return this.outcomes.recordOutcome(c, outcome);
  }

  findById(orgId: string, id: string): Promise<StoredCall | undefined> {
    return this.answers.findById(orgId, id);
  }

  /** The row as it stands now, settled first if its approval expired (see StoredCallAnswers.expireIfOverdue). */
  expireIfOverdue(row: StoredCall): Promise<StoredCall> {
    return this.answers.expireIfOverdue(row);
  }

  /**
   * The answer for a tool_use that already has a ledger row (its replay, or 409 while it executes), without
   * ever starting it: for the items of a batch after one still executing (writes run one at a time, in order).
   * A tool_use with no row yet is answered with `notStarted` (by default 409 IDEMPOTENCY_IN_PROGRESS, naming the
   * batch): nothing was started.
   */
  async replayOnly(p: Principal, runId: string, body: unknown, notStarted: () => AppError = heldBehindEarlierItem): Promise<ToolCallResponse> {
    const { orgId, use, run, idempotencyKey, callDigest } = await this.identify(p, runId, body, undefined);
    await this.keyChecked(p, this.answers.assertKeyLive(p.keyId)); // no intent statement on this path to re-check the key
    return this.answers.replayByKey(replayer(p, orgId), { runId: run.id, idempotencyKey }, callDigest, use.id, notStarted);
  }

  /**
   * Who asks, for which run, what (its one spelling of the params), under which idempotency key and digest: what
   * every answer to a tool_use starts from, a new call or a replay.
   */
  private async identify(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown) {
    try {
      return await this.identifyUnchecked(p, runId, body, idempotencyHeader);
    } catch (err) {
      throw await this.refusalAfterKeyCheck(p, err);
    }
  }

  /**
   * A request refused before any statement re-read its key (a bad body 400, a platform key 403, a run it does not reach
   * 404): the guard may have let it in on this replica's cached copy of a key revoked through another replica. A revoked
   * key is told so first (401, API.md's order of checks), as it is on a run it does reach; one query, on such refusals
   * only. Otherwise the refusal itself, also when the key cannot be checked.
   */
  async refusalAfterKeyCheck(p: Principal, err: unknown): Promise<unknown> {
    if (!(err instanceof AppError) || err.status >= 500 || err.code === 'UNAUTHENTICATED') return err;
    // Once per principal: a batch's items share theirs, so 32 refused items cost one look-up, not 32.
    let revoked = this.keyRechecks.get(p);
    if (!revoked) {
      revoked = this.answers.assertKeyLive(p.keyId).then(
        () => undefined,
        (check: unknown) => (check instanceof AppError && check.code === 'UNAUTHENTICATED' ? check : undefined),
      );
      this.keyRechecks.set(p, revoked);
    }
    const refusal = await revoked;
    if (!refusal) return err;
    this.keys.refused(p);
    return refusal;
  }

  /** refusalAfterKeyCheck's look-ups, by principal (one per request; a batch's items share one). */
  private readonly keyRechecks = new WeakMap<Principal, Promise<AppError | undefined>>();

  private async identifyUnchecked(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown) {
    // Agent or org admin keys (API.md §1); a platform key has no org to act in. Before the body: the key, not the request, is wrong.
    if (!p.orgId) throw new AppError('FORBIDDEN', PLATFORM_KEY_REFUSED);
    const orgId = p.orgId;
    const parsed = parseToolUse(body);
    // From here on, one spelling of the params, its defaults spelled out: the policy judges what the vendor will act on.
    const { canonical, acted } = this.catalog.paramSpellings(parsed.name, parsed.action, parsed.params);
    const use = { ...parsed, params: acted };
    // The org's digest key: read once per org and process, then from memory (OrgDigestKeys), never a query per call.
    const [run, digestKey] = await Promise.all([this.runs.snapshot(p, runId), this.digestKeys.get(orgId)]);
    const idempotencyKey = idempotencyKeyFor(idempotencyHeader, run.id, use.id);
    // Over the params as sent (in their one spelling), not their defaults: a call recorded before a default was
    // spelled out (VendorHandler.withDefaults) is replayed when sent again, not refused as another action.
    const identity = { toolName: use.name, action: (use.action ?? null) as string, params: canonical };
    // Keyed under the org's key (what is stored and shown); the unkeyed form only to recognise a call recorded before
    // digests were keyed, computed only when a stored digest is compared and differs (sameAction).
    const callDigest: CallDigest = { keyed: actionDigest(identity, digestKey), unkeyed: () => unkeyedActionDigest(identity) };
    return { orgId, use, run, idempotencyKey, callDigest };
  }

  /**
   * `work`, whose 401 (the key found revoked since the guard let this request in, on another replica) tells the
   * key service: the request was no use of the key (see ApiKeysService.refused).
   */
  private async keyChecked<T>(p: Principal, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHENTICATED') this.keys.refused(p);
      throw err;
    }
  }

  /** The body for a stored call (see StoredCallAnswers.answerStored); `wholeResult` for GET …/result. */
  answerStored(row: StoredCall, toolUseId: string, replayed: boolean, wholeResult = false): Promise<ToolCallResponse> {
    return this.answers.answerStored(row, toolUseId, replayed, wholeResult);
  }

  private count(tool: string, action: string, status: string, errorCode: string | null): void {
    countToolCall(this.catalog, this.metrics, tool, action, status, errorCode);
  }
}
