import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import { databaseCause } from '../common/errors/database-errors.js';
import { newId } from '../common/ids.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { PoliciesService } from '../policy/policies.service.js';
import type { PolicyDecision } from '../policy/policy.types.js';
import { retryWhileUnavailable } from '../common/errors/unavailable-retry.js';
import { httpStatusFor } from '../tool-calls/tool-call-body.js';
import type { ApprovalKind } from './approval-request.entity.js';
import { CLAIM_APPROVED_CALL_SQL } from './approved-call-claim.sql.js';
import { policyBlockAfterApproval } from './approved-call-policy.js';

/** Claims sent again after the policy was found replaced between the decision and the claim; more is a storm of admin changes. */
const POLICY_REDECIDE_MAX = 3;

/** A call as the claim returns it: claimed (running) or ended by a gate the approval cannot speak for (blocked). */
export interface ClaimedCall {
  id: string;
  org_id: string;
  run_id: string;
  tool_name: string;
  action: string;
  action_digest: string;
  idempotency_key: string;
  tool_use_id: string;
  status: 'running' | 'blocked';
  /**
   * Why the call is blocked; on a `running` call, a claim resumed after its answer was lost whose call may no longer be
   * sent (its run ended, the flag turned off, its approver's key revoked or the policy blocking it since): the runner
   * settles it as not sent.
   */
  error_code: 'FEATURE_DISABLED' | 'POLICY_BLOCKED' | 'APPROVAL_REVOKED' | 'RUN_NOT_ACTIVE' | null;
}

/** The claim's answer may also be the call still `approved`: not claimed, the policy it was decided on is no longer the org's. */
type ClaimAnswer = ClaimedCall | (Omit<ClaimedCall, 'status'> & { status: 'approved' });

/** What the call was approved on: the catalog entry, the approved params, and the kind of approval that approved them. */
export interface ApprovedAction {
  entry: CatalogEntry;
  params: Record<string, unknown>;
  approvalKind: ApprovalKind | null;
}

/** What the claim may do, from the runner: whether a new claim may be made (not stopping), and when to stop waiting. */
export interface ClaimGate {
  mayClaim(): boolean;
  closing: AbortSignal;
}

/**
 * The claim of one approved call (approved-call-claim.sql.ts) on the org's
 * flag and policy, and its approver's key, as they stand.
 */
@Injectable()
export class ApprovedCallClaimer {
  private readonly log = new Logger('ApprovedCalls');

  constructor(
    private readonly sql: Sql,
    private readonly policies: PoliciesService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * The policy is decided on the rules of one version and the call claimed only while that version is still
   * the org's. One replaced in between (on another replica, inside this one's cache window) is read afresh and
   * decided again, a bounded number of times; past that the call stays approved for a later sweep. The
   * approval's kind is part of the decision (a client approval does not answer a policy that now asks for an
   * expert); it never changes, so it is read with the approved input, not in the claim. A call whose
   * entry or params cannot be had (`approved` null) is not decided: nothing is sent either way, and the runner
   * records it not executed.
   */
  async claim(orgId: string, toolCallId: string, approved: ApprovedAction | null, gate: ClaimGate): Promise<ClaimedCall | undefined> {
    for (let attempt = 0; ; attempt++) {
      const { rules, version } = await this.policies.rulesFor(orgId);
      const block = approved ? policyBlockAfterApproval(approved.entry, approved.params, rules, approved.approvalKind) : null;
      const call = await this.claimOn(toolCallId, version, block, gate);
      if (call?.status !== 'approved') return call;
      this.policies.forget(orgId);
      if (attempt >= POLICY_REDECIDE_MAX) {
        this.log.warn({ toolCallId }, "approved call not claimed: the org's policy kept changing while it was decided; a later sweep runs it");
        return undefined;
      }
    }
  }

  /**
   * The claim statement, sent again while the database is unavailable. A resend is safe
   * however the first attempt ended — not committed (the call is still approved: a fresh claim), or committed
   * with its answer lost (the claim token finds it ours: resumed, as resumableWrite does for outcome writes) —
   * and it is what keeps a committed claim from being left running with no vendor request: the budget is the
   * time after which the orphan sweep may take the call anyway. Left unconfirmed (the database out longer, or
   * the gateway stopping), the call is either still approved (a later sweep runs it) or running with nothing
   * sent, which the orphan sweep will mark indeterminate: the one case the gateway cannot tell apart from a
   * crash at the vendor, and it needs the database gone for that long.
   */
  private async claimOn(toolCallId: string, policyVersion: number, block: PolicyDecision | null, gate: ClaimGate): Promise<ClaimAnswer | undefined> {
    const token = randomUUID();
    const disabledStatus = httpStatusFor('blocked', 'FEATURE_DISABLED');
    const blockedBy = block ? [newId(), block.riskLevel, block.ruleId, block.reason] : [null, null, null, null];
    const policyStatus = httpStatusFor('blocked', 'POLICY_BLOCKED');
    const revokedStatus = httpStatusFor('blocked', 'APPROVAL_REVOKED');
    const endedStatus = httpStatusFor('blocked', 'RUN_NOT_ACTIVE');
    // Recorded on the row it claims: how long this replica may hold it running, what the orphan sweep judges it by.
    const staleAfterMs = this.config.VENDOR_TIMEOUT_MS + this.config.STALE_RUNNING_MARGIN_MS;
    try {
      const [call] = await retryWhileUnavailable(
        // Once the gateway is stopping, a resend only resumes a claim that may have committed: it makes no new one.
        () =>
          this.sql.query<ClaimAnswer>(CLAIM_APPROVED_CALL_SQL, [
            toolCallId, disabledStatus, token, gate.mayClaim(), policyVersion, ...blockedBy, policyStatus, revokedStatus, endedStatus, staleAfterMs,
          ]),
        { budgetMs: staleAfterMs, capMs: 1_000, signal: gate.closing },
      );
      return call;
    } catch (err) {
      // Any other error is the statement's own: it rolled back, the call is still approved, a later sweep retries.
      const cause = databaseCause(err);
      if (!cause) throw err;
      this.log.warn({ toolCallId, ...cause }, 'approved call claim unconfirmed (database unavailable): a later sweep runs it if it is still approved; if the claim committed, the orphan sweep will mark it indeterminate');
      return undefined;
    }
  }
}
