import { Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { DataSource, type EntityManager } from 'typeorm';
import { actorOf, reachesRun, type Principal } from '../auth/principal.js';
import { ApprovalExpiries } from '../approvals/approval-expiries.js';
import { EXPIRY_BATCH, settleApprovalsSql, type SettledApproval } from '../approvals/approval-settle.sql.js';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { retryOnDeadlock } from '../common/errors/database-errors.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { isUuid, newId } from '../common/ids.js';
import { jsonbNumberLength } from '../common/storable-text.js';
import { insertEventsSql } from '../ledger/ledger-events.service.js';
import { ToolPermissionsService } from '../permissions/tool-permissions.service.js';
import { AgentRunEntity, type RunStatus } from './agent-run.entity.js';
import type { CreateRunDto } from './runs.dto.js';
import { buildModelTools, formatTools, type ToolFormat } from './tool-definitions.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { settledCalls } from '../tool-calls/stored-call.js';
import { redactFreeText, redactMetadata } from '../redaction/redaction.service.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { manifestDigest, manifestTools, objectAt } from './run-manifest.js';
import { setBounded } from '../common/cache/bounded-map.js';

/** What the hot path needs of a run; everything here is fixed at creation. */
export interface RunSnapshot {
  id: string;
  orgId: string;
  specialistId: string;
  allowedTools: ReadonlySet<string>;
  status: RunStatus;
  /** The key that started the run: an agent key reaches only its own runs (reachesRun), checked on the cached snapshot too. */
  createdBy: string | null;
}

const MAX_METADATA_BYTES = 16 * 1024;
const SNAPSHOT_CACHE_MAX = 50_000;
/**
 * How long a run read settles the run's overdue approvals before answering (as the ops reads do,
 * ToolCallsQueryService.expireOverdueApprovalsOf): EXPIRY_BATCH a statement; the sweep settles the rest, and the
 * read counts those still pending past their expiry as expired meanwhile.
 */
const READ_EXPIRY_BUDGET_MS = 1_000;
/**
 * A read's settle skips an overdue approval another session holds rather than wait for its lock (for as long as the
 * holder likes: a GET waited the statement timeout and answered 503). Most holders let go in moments — another read
 * or the sweep settling it, a decision — so the read looks again every HELD_RETRY_MS for up to HELD_WAIT_MS, then
 * answers with it shown expired; the holder or the sweep writes it down.
 */
const HELD_WAIT_MS = 250;
const HELD_RETRY_MS = 25;
const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());
/** Pending approvals a run's end rejects per statement (its first statement included): one over the whole backlog outlasted the statement timeout. */
export const END_BATCH = 1_000;
/** How long the request that ends a run goes on rejecting its backlog before answering; the rest goes on after it (finishEnds). */
const END_BUDGET_MS = 1_000;
/**
 * How often the backlogs ended runs left (a process stopped while rejecting one, an approval held through every pass) are
 * looked for: a read of every pending approval, so not every few seconds; the process that ended the run finishes its
 * backlog itself, at once (finishEnd).
 */
const ENDED_BACKLOG_EVERY_MS = 60_000;
/** Passes over an ended run that had to skip an approval someone held, and the pause before each. */
const SKIPPED_RETRIES = 10;
const SKIPPED_RETRY_MS = 500;

/** Where a batch of an end's rejections stopped: the last approval it read (keyset, newest first), and whether more may follow. */
interface EndBatch {
  blocked: string[];
  more: boolean;
  /** Some it read were held by someone else (skipped; a later pass takes them). */
  skipped: boolean;
  after: { created: string; id: string } | null;
}

/**
 * One batch of the pending approvals of an ended run ($1) not yet past their expiry at $5 (an overdue one expired
 * before anyone rejected it: the expiry sweep settles it as such, settleApprovalsSql), the newest first from after
 * ($2 created_at text, $3 id; null: the start), at most $4: rejected as the end rejects them (decided by the key that ended it, with its reason:
 * metadata.ended), each call blocked RUN_NOT_ACTIVE, its raw input deleted, a tool_call.blocked event each. Decisions
 * leave an ended run's approvals alone (settleApprovalsSql), so only this rejects them; an approval
 * another end batch holds is skipped (SKIP LOCKED: concurrent batches, here or on another replica, share the work,
 * and never wait for each other or for a decision holding one), and one settled meanwhile is not read again
 * (status = 'pending' once locked). Locked in id order, as every settle.
 */
const REJECT_ENDED_BATCH_SQL = `
  WITH pick AS MATERIALIZED (
         SELECT id, created_at FROM approval_requests
          WHERE run_id = $1 AND status = 'pending' AND expires_at > $5 AND ($2::text IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
          ORDER BY created_at DESC, id DESC LIMIT $4::int),
       lk AS MATERIALIZED (
         SELECT id FROM approval_requests WHERE id IN (SELECT id FROM pick) AND status = 'pending' AND expires_at > $5 ORDER BY id FOR UPDATE SKIP LOCKED),
       ru AS (
         SELECT id, org_id, metadata->'ended' AS ended FROM agent_runs WHERE id = $1 AND status IN ('completed', 'cancelled')),
       ap AS (
         UPDATE approval_requests a SET status = 'rejected', decided_by = (ru.ended->'by'->>'keyId')::uuid, decided_role = ru.ended->'by'->>'role',
                decided_at = now(), decision_reason = ru.ended->>'reason'
           FROM ru WHERE a.id IN (SELECT id FROM lk) AND a.status = 'pending' RETURNING a.id, a.tool_call_id, a.decision_reason),
       tc AS (
         UPDATE tool_calls t SET status = 'blocked', error_code = 'RUN_NOT_ACTIVE', http_status = 403, finished_at = now(), updated_at = now()
           FROM ap WHERE t.id = ap.tool_call_id AND t.status IN ('waiting_approval', 'approved')
          RETURNING t.id, t.org_id, t.tool_name, t.action, t.action_digest),
       ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id),
       ev AS (
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
         SELECT gen_random_uuid(), tc.org_id, 'tool_call.blocked', $1::uuid, tc.id, ru.ended->'by',
                jsonb_build_object('toolName', tc.tool_name, 'action', tc.action, 'digest', tc.action_digest, 'approvalId', ap.id,
                                   'errorCode', 'RUN_NOT_ACTIVE', 'reason', 'run_ended',
                                   -- The end's reason, kept on the approval as its decision reason: its SHA-256, as a decision's (approval-settle.sql.ts).
                                   'reasonDigest', encode(sha256(convert_to(ap.decision_reason, 'UTF8')), 'hex'))
           FROM tc JOIN ap ON ap.tool_call_id = tc.id CROSS JOIN ru),
       last AS (SELECT created_at::text AS created, id::text AS id FROM pick ORDER BY created_at, id LIMIT 1)
  SELECT coalesce((SELECT array_agg(id) FROM tc), '{}')::text[] AS blocked, (SELECT count(*) FROM pick)::int AS picked, (SELECT count(*) FROM lk)::int AS locked,
         (SELECT created FROM last) AS last_created, (SELECT id FROM last) AS last_id`;

/** Bytes of JSON as PostgreSQL gives the metadata back: a jsonb number is printed in full (1e308 is 309 digits). */
function metadataBytes(metadata: object): number {
  let longer = 0;
  const text = JSON.stringify(metadata, (_key, value: unknown) => {
    if (typeof value === 'number' && Number.isFinite(value)) longer += jsonbNumberLength(value) - String(value).length;
    return value;
  });
  return Buffer.byteLength(text) + longer;
}

/** When and why an ended run ended (runs ended before `at` was kept: the row's last update, which was the end). */
function endedView(r: AgentRunEntity): { at: string; reason: string | null } {
  const ended = objectAt(r.metadata, 'ended');
  const at = typeof ended?.at === 'string' ? new Date(ended.at) : null;
  return { at: (at && !Number.isNaN(at.getTime()) ? at : r.updatedAt).toISOString(), reason: typeof ended?.reason === 'string' ? ended.reason : null };
}

/** The 403 a platform key gets on POST /v1/runs (the route's @OrgKeyOnly, and create's own check). */
export const RUNS_NEED_ORG_KEY = 'runs are created with an agent or admin key of an org; a platform key (orgId null) belongs to no org';

/**
 * Up to 100 ended runs that still have pending approvals (RunsService's periodic pass): read off the pending approvals'
 * own index (approval_requests_pending_run_idx), not every approval ever made.
 */
export const ENDED_RUNS_WITH_PENDING_APPROVALS_SQL = `SELECT DISTINCT a.run_id FROM approval_requests a
  WHERE a.status = 'pending' AND EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = a.run_id AND r.status IN ('completed', 'cancelled'))
  LIMIT 100`;

@Injectable()
export class RunsService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly snapshots = new Map<string, RunSnapshot>();
  private readonly log = new Logger('Runs');
  /** Finishes the backlogs of ended runs left pending (see finishEnds). */
  private readonly endedBacklogs = new PeriodicTask('ended runs backlog', ENDED_BACKLOG_EVERY_MS, () => this.finishEnds(), this.log);
  /** Runs whose backlog a background pass of this process is rejecting now, and those passes (awaited at shutdown). */
  private readonly finishing = new Map<string, Promise<void>>();
  private stopping = false;

  constructor(
    private readonly ds: DataSource,
    private readonly permissions: ToolPermissionsService,
    private readonly catalog: ToolCatalogService,
    private readonly clock: Clock,
    private readonly expiries: ApprovalExpiries,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.endedBacklogs.haltOn(phase?.signal);
  }

  onApplicationBootstrap(): void {
    this.endedBacklogs.start(0); // what a previous process left (stopped while an end's backlog was being rejected)
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true; // a pass stops after its batch in progress; another replica's, or the restart's, finishes
    await this.endedBacklogs.stop();
    await Promise.allSettled([...this.finishing.values()]);
  }

  async create(actor: Principal, dto: CreateRunDto) {
    // Agent or org admin keys (API.md §1); a platform key has no org to create the run in.
    if (!actor.orgId) throw new AppError('FORBIDDEN', RUNS_NEED_ORG_KEY);
    if (dto.metadata && metadataBytes(dto.metadata) > MAX_METADATA_BYTES) {
      throw new AppError('VALIDATION_FAILED', `metadata: at most ${MAX_METADATA_BYTES} bytes of JSON`);
    }
    const orgId = actor.orgId;
    const id = newId();
    // The agent's own metadata, shown back to ops and the agent: a credential in it goes as from a tool's input.
    const user = dto.metadata ? { user: redactMetadata(dto.metadata, MAX_METADATA_BYTES) } : {};
    const { row, metadata } = await this.ds.transaction(async (m) => {
      // The manifest is a snapshot: later permission changes do not widen or narrow a running run. Read in this
      // transaction, ordered against a PUT of the permissions (allowedToolsForNewRun).
      const allowedTools = await this.permissions.allowedToolsForNewRun(orgId, dto.specialistId, m);
      const metadata = { runtimeManifest: { allowedTools }, ...user };
      const ev = insertEventsSql(
        [{ orgId, type: 'run.created', runId: id, actor: actorOf(actor), metadata: { specialistId: dto.specialistId, allowedToolCount: allowedTools.length, manifestDigest: manifestDigest(allowedTools) } }],
        7,
      );
      const inserted = (await m.query(
        `WITH r AS (INSERT INTO agent_runs (id, org_id, specialist_id, conversation_id, status, metadata, created_by)
                    VALUES ($1, $2, $3, $4, 'running', $5::jsonb, $6) RETURNING created_at),
              e AS (${ev.sql})
         SELECT created_at FROM r`,
        [id, orgId, dto.specialistId, dto.conversationId ?? null, JSON.stringify(metadata), actor.keyId, ...ev.params],
      )) as [{ created_at: Date }];
      await holdActorKey(managerQuery(m), actor);
      return { row: inserted[0], metadata };
    });
    return this.view({
      id, orgId, specialistId: dto.specialistId, conversationId: dto.conversationId ?? null, status: 'running',
      metadata, pendingApprovalCount: 0, createdAt: row.created_at,
    } as AgentRunEntity, 0);
  }

  /** A run the principal may see, or 404 (another org's run, or another agent key's, looks missing: reachesRun). */
  async get(actor: Principal, runId: string, notFound: 'NOT_FOUND' | 'RUN_NOT_FOUND' = 'NOT_FOUND') {
    let run = isUuid(runId) ? await this.ds.getRepository(AgentRunEntity).findOne({ where: { id: runId } }) : null;
    if (!run || !reachesRun(actor, run)) throw new AppError(notFound, 'run not found');
    // Its status and pending count are counters the settle keeps: an approval past its expiry is written down
    // first (nothing more to read for a run with none pending, nor for one with none overdue), a batch at a time for
    // up to READ_EXPIRY_BUDGET_MS, so the run does not show it pending until the sweep. Those still pending past their
    // expiry after that — past the budget, or held by another session (skipped, not waited for: expireOverdueOfRun)
    // — are shown expired all the same (README: from the moment it passes), and the sweep (or the holder) settles them.
    let stillOverdue = 0;
    if (run.pendingApprovalCount > 0 && (run.status === 'running' || run.status === 'waiting_approval')) {
      const now = this.clock.now();
      const live = (c: { status: RunStatus; overdue: number } | undefined): boolean => !!c && (c.status === 'running' || c.status === 'waiting_approval');
      let counters = await this.countersOf(run.id, now);
      if (live(counters) && (counters?.overdue ?? 0) > 0) {
        const { more } = await this.expireOverdueOfRun(run.id, now);
        counters = await this.countersOf(run.id, now);
        // Overdue ones left though the batches did not run out: held by someone else (skipped), looked at again briefly.
        const heldUntil = performance.now() + HELD_WAIT_MS;
        while (!more && live(counters) && (counters?.overdue ?? 0) > 0 && performance.now() < heldUntil) {
          await pause(HELD_RETRY_MS);
          await this.expireOverdueOfRun(run.id, now);
          counters = await this.countersOf(run.id, now);
        }
      }
      if (counters && (counters.status === 'running' || counters.status === 'waiting_approval')) {
        run.status = counters.status;
        run.pendingApprovalCount = counters.pending_approval_count;
        stillOverdue = counters.overdue;
      } else {
        run = (await this.ds.getRepository(AgentRunEntity).findOne({ where: { id: runId } })) ?? run; // ended meanwhile
      }
    }
    const [{ total }] = (await this.ds.query('SELECT coalesce(sum(cost_cents), 0)::bigint AS total FROM tool_calls WHERE run_id = $1', [runId])) as [
      { total: string },
    ];
    return this.view(run, Number(total), stillOverdue);
  }

  /** The run's counters and its approvals still pending past `now`, on one snapshot (the sweep may be settling them). */
  private async countersOf(runId: string, now: Date): Promise<{ status: RunStatus; pending_approval_count: number; overdue: number } | undefined> {
    const [row] = (await this.ds.query(
      `SELECT r.status, r.pending_approval_count,
              (SELECT count(*)::int FROM approval_requests a WHERE a.run_id = r.id AND a.status = 'pending' AND a.expires_at <= $2) AS overdue
         FROM agent_runs r WHERE r.id = $1`,
      [runId, now],
    )) as { status: RunStatus; pending_approval_count: number; overdue: number }[];
    return row;
  }

  /**
   * The run's approvals overdue at `now` written down (as the sweep would: expired, the call blocked APPROVAL_EXPIRED),
   * EXPIRY_BATCH a statement, each a transaction of its own, until fewer come back or READ_EXPIRY_BUDGET_MS has passed
   * (`more`: some may be left, for the sweep). One another session holds is skipped (skipLocked, settleApprovalsSql): a
   * read never waits for a decision, the sweep or a long transaction — the holder or the sweep writes it down.
   */
  private async expireOverdueOfRun(runId: string, now: Date): Promise<{ settled: string[]; more: boolean }> {
    const deadline = performance.now() + READ_EXPIRY_BUDGET_MS;
    const settled: string[] = [];
    for (;;) {
      // Sent again if it lost a deadlock (rolled back whole; it settles only approvals still pending).
      const rows = await retryOnDeadlock(
        () =>
          this.ds.query(settleApprovalsSql('expired', { batched: true, ofRun: true, skipLocked: true }), [runId, 'expired', now, null, null, null, EXPIRY_BATCH]) as Promise<
            SettledApproval[]
          >,
      );
      this.expiries.recorded(rows); // a read that settles an expiry says so, as the sweep does (and wakes the long-polls)
      settled.push(...rows.map((r) => r.tool_call_id));
      if (rows.length < EXPIRY_BATCH) return { settled, more: false };
      if (performance.now() >= deadline) return { settled, more: true };
    }
  }

  /**
   * Ends a run (completed or cancelled; API.md is silent, see the OpenAPI description): from then on
   * nothing new executes in it. One transaction under the run's lock, so it happens once even when two replicas race:
   * - the run leaves running/waiting_approval (its pending count goes to 0);
   * - the calls approved but not yet started are blocked with RUN_NOT_ACTIVE (their raw input deleted); calls already
   *   at the vendor finish and record their outcome as usual;
   * - its pending approvals are rejected by the caller (decision_reason: the end's reason, if one was given) and the calls
   *   waiting for them blocked with RUN_NOT_ACTIVE (their raw input deleted): END_BATCH in that transaction, the rest of
   *   a large backlog a batch a statement after it (one statement over all of it outlasted the statement timeout, and
   *   the run could not be ended at all) — in this request for up to END_BUDGET_MS, then in the background (finishEnd,
   *   and finishEnds for what a stopped process left). Meanwhile none of them can be approved (the settle statement
   *   decides no approval of an ended run, and the claim runs no call of one), and one that passes its expiry first
   *   is expired, not rejected;
   * - new tool calls get 409 RUN_NOT_ACTIVE on every replica (the intent statement reads the
   *   run's status under a lock this waits for: a call whose intent committed first was accepted
   *   before the end and runs); a call the run made earlier is still replayed.
   * Ending it again the same way answers the run again; the other way is 409 RUN_NOT_ACTIVE.
   */
  async end(actor: Principal, runId: string, to: 'completed' | 'cancelled', given: string | null) {
    const run = await this.get(actor, runId);
    const reason = given === null ? null : redactFreeText(given);
    // Two deciders crossing (an approval decided while the run ends) may deadlock; the loser tries again.
    const first = await retryOnDeadlock(() => this.ds.transaction((m) => this.endRun(m, run.id, to, reason, actorOf(actor))));
    this.forget(run.id);
    // Committed: the long-polls on the calls it blocked answer now (and an approved call's kept slot is let go).
    for (const id of first?.blocked ?? []) settledCalls.emit('settled', id);
    const ended = first !== null;
    // The rest of a large backlog, a batch a statement, for up to END_BUDGET_MS; then after the answer (finishEnd). The
    // run has ended either way: a batch failing here (it is sent again later) does not fail the request.
    if (first) await this.rejectRestOfBacklog(run.id, first);
    const now = await this.get(actor, runId);
    if (!ended && now.status !== to) throw new AppError('RUN_NOT_ACTIVE', `run is already ${now.status}`);
    return now;
  }

  /**
   * What the end's first batch left of the backlog: rejected here for up to END_BUDGET_MS, then in the background
   * (finishEnd) from where this stopped — over the whole run again when a batch skipped an approval someone held. A
   * batch failing here does not fail the request: the run has ended, and the background pass sends it again.
   */
  private async rejectRestOfBacklog(runId: string, first: EndBatch): Promise<void> {
    const progress = { after: first.after, skipped: first.skipped };
    let done = !first.more && !first.skipped;
    if (first.more && !first.skipped) {
      done = await this.rejectEndedBacklog(runId, first.after, performance.now() + END_BUDGET_MS, progress).catch((err: unknown) => {
        this.log.warn(`rejecting the pending approvals of ended run ${runId} goes on after the answer: ${loggableErrorText(err)}`);
        return false;
      });
    }
    if (!done) void this.finishEnd(runId, progress.skipped ? null : progress.after);
  }

  /**
   * In this order, each statement under READ COMMITTED seeing what committed before it: the run FOR UPDATE, which
   * waits for intent statements in flight (they hold it FOR KEY SHARE, see ToolCallLedger.writeIntent) and makes later
   * ones find it ended, and for a decision already settling one of its approvals (it reads the run FOR KEY SHARE,
   * settleApprovalsSql; one that comes after finds it ended and decides nothing: only the end's batches reject an ended
   * run's approvals, and the expiry sweep expires those past their expiry). Then one bounded statement ends it: its status (pending count 0; who ended it and why
   * kept in metadata.ended, for the batches that follow), the calls approved but not started blocked, the run's event;
   * then the first batch of its pending approvals (REJECT_ENDED_BATCH_SQL: it skips, not waits for, one locked by
   * someone else). Returns the ids of the calls it blocked and where the batch stopped, or null when the run had
   * already ended.
   */
  private async endRun(m: EntityManager, runId: string, to: 'completed' | 'cancelled', reason: string | null, by: { keyId: string; role: string }): Promise<EndBatch | null> {
    const [locked] = (await m.query('SELECT status FROM agent_runs WHERE id = $1 FOR UPDATE', [runId])) as { status: RunStatus }[];
    if (!locked || (locked.status !== 'running' && locked.status !== 'waiting_approval')) return null;
    // After the wait for that lock: a revocation committed meanwhile is read (holdActorKey). The end is dated after it
    // too (clock_timestamp(), not the transaction's start): not before calls the run still took in while it waited.
    await holdActorKey(managerQuery(m), by);
    // The free-text reason stays off the append-only ledger (as a reconcile's note does): it is kept on the
    // run and on the approvals it rejects, and the event says whether one was given and its SHA-256 (reasonDigest, null
    // for none), which ledger verify holds the run's stored reason to. blockedCalls counts the calls
    // waiting for an approval too: the batches block every one whose approval is not past its expiry (as they pick
    // them); one past it is the expiry sweep's, blocked APPROVAL_EXPIRED, and was counted here as the end's.
    const [{ blocked }] = (await m.query(
      `WITH ru AS (
         UPDATE agent_runs SET status = $2, pending_approval_count = 0, updated_at = now(),
                metadata = metadata || jsonb_build_object('ended', jsonb_build_object('at', clock_timestamp(), 'reason', $3::text, 'by', $5::jsonb))
          WHERE id = $1 RETURNING id, org_id),
       tc AS (
         UPDATE tool_calls t SET status = 'blocked', error_code = 'RUN_NOT_ACTIVE', http_status = 403, finished_at = now(), updated_at = now()
           FROM ru WHERE t.run_id = ru.id AND t.status = 'approved'
          RETURNING t.id, t.org_id, t.tool_name, t.action, t.action_digest),
       ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id),
       waiting AS (SELECT count(*) AS n FROM approval_requests WHERE run_id = $1 AND status = 'pending' AND expires_at > $6),
       ev AS (
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
         SELECT gen_random_uuid(), ru.org_id, $4, ru.id, NULL, $5::jsonb,
                jsonb_build_object('reasonGiven', $3::text IS NOT NULL, 'reasonDigest', encode(sha256(convert_to($3::text, 'UTF8')), 'hex'),
                                   'blockedCalls', (SELECT count(*) FROM tc) + (SELECT n FROM waiting)) FROM ru
         UNION ALL
         SELECT gen_random_uuid(), tc.org_id, 'tool_call.blocked', $1::uuid, tc.id, $5::jsonb,
                jsonb_build_object('toolName', tc.tool_name, 'action', tc.action, 'digest', tc.action_digest, 'approvalId', NULL,
                                   'errorCode', 'RUN_NOT_ACTIVE', 'reason', 'run_ended')
           FROM tc)
       SELECT coalesce((SELECT array_agg(id) FROM tc), '{}')::text[] AS blocked`,
      [runId, to, reason, to === 'completed' ? 'run.completed' : 'run.cancelled', JSON.stringify(by), this.clock.now()],
    )) as { blocked: string[] }[];
    const batch = await this.rejectEndedBatch((sql, params) => m.query(sql, params) as Promise<unknown>, runId, null);
    return { ...batch, blocked: [...blocked, ...batch.blocked] };
  }

  /** One REJECT_ENDED_BATCH_SQL statement. */
  private async rejectEndedBatch(query: (sql: string, params: unknown[]) => Promise<unknown>, runId: string, after: EndBatch['after']): Promise<EndBatch> {
    const [row] = (await query(REJECT_ENDED_BATCH_SQL, [runId, after?.created ?? null, after?.id ?? null, END_BATCH, this.clock.now()])) as {
      blocked: string[]; picked: number; locked: number; last_created: string | null; last_id: string | null;
    }[];
    return { blocked: row.blocked, more: row.picked >= END_BATCH, skipped: row.locked < row.picked, after: row.last_created && row.last_id ? { created: row.last_created, id: row.last_id } : after };
  }

  /**
   * Rejects the pending approvals an ended run still has, a batch a statement (each its own transaction), from
   * `after` on, until none is left (true) or the deadline or shutdown comes first, or one was skipped (false). A batch
   * that deadlocks is sent again (rolled back whole).
   */
  private async rejectEndedBacklog(runId: string, after: EndBatch['after'], deadline: number, progress?: { after: EndBatch['after']; skipped: boolean }): Promise<boolean> {
    let skipped = false;
    for (;;) {
      if (performance.now() >= deadline || this.stopping) return false;
      const batch = await retryOnDeadlock(() => this.rejectEndedBatch((sql, params) => this.ds.query(sql, params) as Promise<unknown>, runId, after));
      for (const id of batch.blocked) settledCalls.emit('settled', id);
      skipped ||= batch.skipped;
      after = batch.after;
      if (progress) Object.assign(progress, { after, skipped });
      if (!batch.more) return !skipped;
    }
  }

  /**
   * Goes on rejecting an ended run's backlog after the request that ended it has answered (in the background, logged).
   * A pass that had to skip approvals someone held (a decision being refused, say) goes over the run again shortly, a
   * few times; the periodic pass (finishEnds) takes whatever is left after that.
   */
  private finishEnd(runId: string, from: EndBatch['after'] = null): Promise<void> {
    const running = this.finishing.get(runId);
    if (running) return running;
    const passes = async (): Promise<void> => {
      // The first pass from where the request stopped (those before it are settled, or were skipped: the next passes).
      let after = from;
      for (let pass = 0; pass < SKIPPED_RETRIES && !(await this.rejectEndedBacklog(runId, after, Infinity)) && !this.stopping; pass++) {
        after = null;
        await new Promise((r) => setTimeout(r, SKIPPED_RETRY_MS).unref());
      }
    };
    const pass = passes()
      .then(
        () => undefined,
        (err: unknown) => this.log.warn(`rejecting the pending approvals of ended run ${runId} failed (the next pass goes on): ${loggableErrorText(err)}`),
      )
      .finally(() => this.finishing.delete(runId));
    this.finishing.set(runId, pass);
    return pass;
  }

  /**
   * The periodic pass (and the start-up one): every ended run that still has pending approvals — its end's request
   * answered before the last batch, and this process or the one rejecting them stopped, or it is another replica's —
   * has them rejected. Read off the index of pending approvals (few, as a rule), one run after another.
   */
  private async finishEnds(): Promise<void> {
    const runs = (await this.ds.query(ENDED_RUNS_WITH_PENDING_APPROVALS_SQL)) as { run_id: string }[];
    for (const { run_id } of runs) {
      if (this.stopping) return;
      await this.finishEnd(run_id);
    }
  }

  /**
   * Writes down now the expiry of the pending approvals past `now` — of one call, or of one run — for a read
   * that finds one before the approvals sweep (every few seconds) does: README "reads show it expired from the
   * moment it passes". The statement a decision and the sweep settle with (approval-settle.sql.ts: the call
   * blocked / APPROVAL_EXPIRED, the run's pending count and status, the raw input dropped, one tool_call.blocked
   * event). It settles an approval only while still pending, so racing the sweep, a decision, a run's end or
   * another read, each expiry is recorded once. An approval another session holds is skipped, not waited for (the
   * holder or the sweep writes it down; reads show it expired meanwhile). Returns the ids of the calls this settled.
   */
  async expireOverdueApprovals(scope: { toolCallId: string } | { runId: string }, now: Date): Promise<string[]> {
    if ('runId' in scope) return (await this.expireOverdueOfRun(scope.runId, now)).settled; // a batch a statement, for up to a second
    const overdue = (await this.ds.query(`SELECT id FROM approval_requests WHERE tool_call_id = $1 AND status = 'pending' AND expires_at <= $2 ORDER BY id`, [
      scope.toolCallId,
      now,
    ])) as { id: string }[];
    const settled: string[] = [];
    const heldUntil = performance.now() + HELD_WAIT_MS;
    for (const a of overdue) {
      for (;;) {
        // Past its expiry at `now`, the statement settles it expired whatever $2 says; like a decision, sent again if it
        // lost a deadlock to a run ending at the same moment (rolled back whole, so safe to resend).
        const rows = await retryOnDeadlock(
          () => this.ds.query(settleApprovalsSql('by-id', { skipLocked: true }), [a.id, 'expired', now, null, null, null, null]) as Promise<SettledApproval[]>,
        );
        this.expiries.recorded(rows); // a read that settles an expiry says so, as the sweep does
        settled.push(...rows.map((r) => r.tool_call_id));
        if (rows.length > 0 || performance.now() >= heldUntil) break;
        // Settled by someone else, or held (skipped): another read settling it too lets go in moments (HELD_WAIT_MS).
        const held = (await this.ds.query(`SELECT 1 FROM approval_requests WHERE id = $1 AND status = 'pending'`, [a.id])) as unknown[];
        if (held.length === 0) break;
        await pause(HELD_RETRY_MS);
      }
    }
    return settled;
  }

  /** Drops a cached snapshot (the run ended, here or on another replica). */
  forget(runId: string): void {
    this.snapshots.delete(runId);
  }

  /**
   * Hot path: the fixed facts of a run, cached; 404 RUN_NOT_FOUND for a missing run, another org's, or (to an agent
   * key) another key's (reachesRun: judged on the cached snapshot too, so a hit costs no statement either way).
   */
  async snapshot(p: Principal, runId: string): Promise<RunSnapshot> {
    // Callers refuse platform keys first (they have no org to act in); one reaching here finds no run.
    const reaches = (run: { orgId: string; createdBy: string | null }): boolean => p.orgId !== null && reachesRun(p, run);
    const hit = this.snapshots.get(runId);
    if (hit) {
      if (!reaches(hit)) throw new AppError('RUN_NOT_FOUND', 'run not found');
      return hit;
    }
    const run = isUuid(runId) ? await this.ds.getRepository(AgentRunEntity).findOne({ where: { id: runId } }) : null;
    if (!run || !reaches(run)) throw new AppError('RUN_NOT_FOUND', 'run not found');
    const snap: RunSnapshot = {
      id: run.id, orgId: run.orgId, specialistId: run.specialistId,
      allowedTools: new Set(manifestTools(run.metadata)), status: run.status, createdBy: run.createdBy,
    };
    // An active run stays cacheable: if it ends meanwhile (on any replica), the intent statement finds out and the entry goes.
    if (snap.status === 'running' || snap.status === 'waiting_approval') {
      setBounded(this.snapshots, runId, snap, SNAPSHOT_CACHE_MAX);
    }
    return snap;
  }

  async tools(actor: Principal, runId: string, format: ToolFormat) {
    const run = await this.get(actor, runId);
    const entries = run.manifest.allowedTools
      .map((k) => {
        const dot = k.indexOf('.');
        return this.catalog.find(k.slice(0, dot), k.slice(dot + 1));
      })
      .filter((e): e is CatalogEntry => !!e);
    return { tools: formatTools(buildModelTools(entries), format) };
  }

  /** `overdue`: pending approvals of the run past their expiry, not written down yet (shown expired: not pending). */
  private view(r: AgentRunEntity, totalCostCents: number, overdue = 0) {
    const pending = Math.max(r.pendingApprovalCount - overdue, 0);
    return {
      id: r.id,
      orgId: r.orgId,
      specialistId: r.specialistId,
      conversationId: r.conversationId,
      // As the settle leaves it once it writes them down: with none pending left, a run waiting for approval runs again.
      status: overdue > 0 && pending === 0 && r.status === 'waiting_approval' ? 'running' : r.status,
      pendingApprovalCount: pending,
      totalCostCents,
      manifest: { allowedTools: manifestTools(r.metadata) },
      metadata: objectAt(r.metadata, 'user') ?? {},
      createdAt: r.createdAt.toISOString(),
      ended: r.status === 'completed' || r.status === 'cancelled' ? endedView(r) : null,
    };
  }
}
