import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { actorOf, reachesRun, type Principal } from '../auth/principal.js';
import { ApprovalExpiries } from '../approvals/approval-expiries.js';
import { settleApprovalsSql, type SettledApproval } from '../approvals/approval-settle.sql.js';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { retryOnDeadlock } from '../common/errors/database-errors.js';
import { isUuid, newId } from '../common/ids.js';
import { jsonbNumberLength } from '../common/storable-text.js';
import { insertEventsSql } from '../ledger/ledger-events.service.js';
import { ToolPermissionsService } from '../permissions/tool-permissions.service.js';
import { AgentRunEntity, type RunStatus } from './agent-run.entity.js';
import type { CreateRunDto } from './runs.dto.js';
import { buildModelTools, formatTools, type ToolFormat } from './tool-definitions.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { settledCalls } from '../tool-calls/stored-call.js';

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
  const ended = r.metadata.ended;
  return { at: ended?.at ? new Date(ended.at).toISOString() : r.updatedAt.toISOString(), reason: ended?.reason ?? null };
}

/** The 403 a platform key gets on POST /v1/runs (the route's @OrgKeyOnly, and create's own check). */
export const RUNS_NEED_ORG_KEY = 'runs are created with an agent or admin key of an org; a platform key (orgId null) belongs to no org';

@Injectable()
export class RunsService {
  private readonly snapshots = new Map<string, RunSnapshot>();

  constructor(
    private readonly ds: DataSource,
    private readonly permissions: ToolPermissionsService,
    private readonly catalog: ToolCatalogService,
    private readonly clock: Clock,
    private readonly expiries: ApprovalExpiries,
  ) {}

  async create(actor: Principal, dto: CreateRunDto) {
    // Agent or org admin keys (API.md §1); a platform key has no org to create the run in.
    if (!actor.orgId) throw new AppError('FORBIDDEN', RUNS_NEED_ORG_KEY);
    if (dto.metadata && metadataBytes(dto.metadata) > MAX_METADATA_BYTES) {
      throw new AppError('VALIDATION_FAILED', `metadata: at most ${MAX_METADATA_BYTES} bytes of JSON`);
    }
    // The manifest is a snapshot: later permission changes do not widen or narrow a running run.
    const allowedTools = await this.permissions.allowedTools(actor.orgId, dto.specialistId);
    const id = newId();
    const metadata = { runtimeManifest: { allowedTools }, ...(dto.metadata ? { user: dto.metadata } : {}) };
    const ev = insertEventsSql(
      [{ orgId: actor.orgId, type: 'run.created', runId: id, actor: actorOf(actor), metadata: { specialistId: dto.specialistId, allowedToolCount: allowedTools.length } }],
      7,
    );
    const [row] = await this.ds.transaction(async (m) => {
      const inserted = (await m.query(
        `WITH r AS (INSERT INTO agent_runs (id, org_id, specialist_id, conversation_id, status, metadata, created_by)
                    VALUES ($1, $2, $3, $4, 'running', $5::jsonb, $6) RETURNING created_at),
              e AS (${ev.sql})
         SELECT created_at FROM r`,
        [id, actor.orgId, dto.specialistId, dto.conversationId ?? null, JSON.stringify(metadata), actor.keyId, ...ev.params],
      )) as [{ created_at: Date }];
      await holdActorKey(managerQuery(m), actor);
      return inserted;
    });
    return this.view({
      id, orgId: actor.orgId, specialistId: dto.specialistId, conversationId: dto.conversationId ?? null, status: 'running',
      metadata, pendingApprovalCount: 0, createdAt: row.created_at,
    } as AgentRunEntity, 0);
  }

  /** A run the principal may see, or 404 (another org's run, or another agent key's, looks missing: reachesRun). */
  async get(actor: Principal, runId: string, notFound: 'NOT_FOUND' | 'RUN_NOT_FOUND' = 'NOT_FOUND') {
    let run = isUuid(runId) ? await this.ds.getRepository(AgentRunEntity).findOne({ where: { id: runId } }) : null;
    if (!run || !reachesRun(actor, run)) throw new AppError(notFound, 'run not found');
    // Its status and pending count are counters the settle keeps: an approval past its expiry is written down
    // first (nothing more to read for a run with none pending), so the run does not show it pending until the sweep.
    if (run.pendingApprovalCount > 0 && (await this.expireOverdueApprovals({ runId: run.id }, this.clock.now())).length > 0) {
      run = (await this.ds.getRepository(AgentRunEntity).findOne({ where: { id: runId } })) ?? run;
    }
    const [{ total }] = (await this.ds.query('SELECT coalesce(sum(cost_cents), 0)::bigint AS total FROM tool_calls WHERE run_id = $1', [runId])) as [
      { total: string },
    ];
    return this.view(run, Number(total));
  }

  /**
   * Ends a run (completed or cancelled; API.md is silent, see the OpenAPI description): from then on
   * nothing new executes in it. One statement, so it happens once even when two replicas race:
   * - the run leaves running/waiting_approval (its pending count goes to 0);
   * - its pending approvals are rejected by the caller (decision_reason: the end's reason, if one was given), and the calls
   *   waiting for one, or approved but not yet started, are blocked with RUN_NOT_ACTIVE (their raw
   *   input deleted); calls already at the vendor finish and record their outcome as usual;
   * - new tool calls get 409 RUN_NOT_ACTIVE on every replica (the intent statement reads the
   *   run's status under a lock this waits for: a call whose intent committed first was accepted
   *   before the end and runs); a call the run made earlier is still replayed.
   * Ending it again the same way answers the run again; the other way is 409 RUN_NOT_ACTIVE.
   */
  async end(actor: Principal, runId: string, to: 'completed' | 'cancelled', reason: string | null) {
    const run = await this.get(actor, runId);
    // Two deciders crossing (an approval decided while the run ends) may deadlock; the loser tries again.
    const blocked = await retryOnDeadlock(() => this.ds.transaction((m) => this.endRun(m, run.id, to, reason, actorOf(actor))));
    this.forget(run.id);
    // Committed: the long-polls on the calls it blocked answer now (and an approved call's kept slot is let go).
    for (const id of blocked ?? []) settledCalls.emit('settled', id);
    const ended = blocked !== null;
    const now = await this.get(actor, runId);
    if (!ended && now.status !== to) throw new AppError('RUN_NOT_ACTIVE', `run is already ${now.status}`);
    return now;
  }

  /**
   * In this order, each statement under READ COMMITTED seeing what committed before it: the run's
   * pending approvals are locked first (a decision locks its approval, then the run: the same order),
   * then the run FOR UPDATE, which waits for intent statements in flight (they hold it FOR KEY SHARE,
   * see ToolCallLedger.writeIntent) and makes later ones find it ended; then everything the run left. Returns the ids
   * of the calls it blocked, or null when the run had already ended.
   */
  private async endRun(m: EntityManager, runId: string, to: 'completed' | 'cancelled', reason: string | null, by: { keyId: string; role: string }): Promise<string[] | null> {
    await m.query(`SELECT id FROM approval_requests WHERE run_id = $1 AND status = 'pending' ORDER BY id FOR UPDATE`, [runId]);
    const [locked] = (await m.query('SELECT status FROM agent_runs WHERE id = $1 FOR UPDATE', [runId])) as { status: RunStatus }[];
    if (!locked || (locked.status !== 'running' && locked.status !== 'waiting_approval')) return null;
    // After the waits for those locks: a revocation committed meanwhile is read (holdActorKey).
    await holdActorKey(managerQuery(m), by);
    // The free-text reason stays off the append-only ledger (as a reconcile's note does): it is kept on the
    // run and on the approvals it rejects, and the event says whether one was given.
    const [{ blocked }] = (await m.query(
      `WITH ru AS (
         UPDATE agent_runs SET status = $2, pending_approval_count = 0, updated_at = now(),
                metadata = metadata || jsonb_build_object('ended', jsonb_build_object('at', now(), 'reason', $5::text))
          WHERE id = $1 RETURNING id, org_id),
       ap AS (
         UPDATE approval_requests a SET status = 'rejected', decided_by = $3::uuid, decided_role = $4, decided_at = now(), decision_reason = $5
           FROM ru WHERE a.run_id = ru.id AND a.status = 'pending' RETURNING a.id, a.tool_call_id),
       tc AS (
         UPDATE tool_calls t SET status = 'blocked', error_code = 'RUN_NOT_ACTIVE', http_status = 403, finished_at = now(), updated_at = now()
           FROM ru WHERE t.run_id = ru.id AND t.status IN ('waiting_approval', 'approved')
          RETURNING t.id, t.org_id, t.tool_name, t.action, t.action_digest),
       ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id),
       ev AS (
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
         SELECT gen_random_uuid(), ru.org_id, $6, ru.id, NULL, $7::jsonb,
                jsonb_build_object('reasonGiven', $5::text IS NOT NULL, 'blockedCalls', (SELECT count(*) FROM tc)) FROM ru
         UNION ALL
         SELECT gen_random_uuid(), tc.org_id, 'tool_call.blocked', $1::uuid, tc.id, $7::jsonb,
                jsonb_build_object('toolName', tc.tool_name, 'action', tc.action, 'digest', tc.action_digest, 'approvalId', ap.id,
                                   'errorCode', 'RUN_NOT_ACTIVE', 'reason', 'run_ended')
           FROM tc LEFT JOIN ap ON ap.tool_call_id = tc.id)
       SELECT coalesce((SELECT array_agg(id) FROM tc), '{}')::text[] AS blocked`,
      [runId, to, by.keyId, by.role, reason, to === 'completed' ? 'run.completed' : 'run.cancelled', JSON.stringify(by)],
    )) as { blocked: string[] }[];
    return blocked;
  }

  /**
   * Writes down now the expiry of the pending approvals past `now` — of one call, or of one run — for a read
   * that finds one before the approvals sweep (every few seconds) does: README "reads show it expired from the
   * moment it passes". The statement a decision and the sweep settle with (approval-settle.sql.ts: the call
   * blocked / APPROVAL_EXPIRED, the run's pending count and status, the raw input dropped, one tool_call.blocked
   * event). It settles an approval only while still pending, so racing the sweep, a decision, a run's end or
   * another read, each expiry is recorded once. Returns the ids of the calls this settled.
   */
  async expireOverdueApprovals(scope: { toolCallId: string } | { runId: string }, now: Date): Promise<string[]> {
    const [column, id] = 'toolCallId' in scope ? ['tool_call_id', scope.toolCallId] : ['run_id', scope.runId];
    const overdue = (await this.ds.query(`SELECT id FROM approval_requests WHERE ${column} = $1 AND status = 'pending' AND expires_at <= $2 ORDER BY id`, [
      id,
      now,
    ])) as { id: string }[];
    const settled: string[] = [];
    for (const a of overdue) {
      // Past its expiry at `now`, the statement settles it expired whatever $2 says; like a decision, sent again if it
      // lost a deadlock to a run ending at the same moment (rolled back whole, so safe to resend).
      const rows = await retryOnDeadlock(() => this.ds.query(settleApprovalsSql('by-id'), [a.id, 'expired', now, null, null, null]) as Promise<SettledApproval[]>);
      this.expiries.recorded(rows); // a read that settles an expiry says so, as the sweep does
      settled.push(...rows.map((r) => r.tool_call_id));
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
      allowedTools: new Set(run.metadata.runtimeManifest.allowedTools), status: run.status, createdBy: run.createdBy,
    };
    // An active run stays cacheable: if it ends meanwhile (on any replica), the intent statement finds out and the entry goes.
    if (snap.status === 'running' || snap.status === 'waiting_approval') {
      if (this.snapshots.size >= SNAPSHOT_CACHE_MAX) this.snapshots.clear();
      this.snapshots.set(runId, snap);
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

  private view(r: AgentRunEntity, totalCostCents: number) {
    return {
      id: r.id,
      orgId: r.orgId,
      specialistId: r.specialistId,
      conversationId: r.conversationId,
      status: r.status,
      pendingApprovalCount: r.pendingApprovalCount,
      totalCostCents,
      manifest: { allowedTools: r.metadata.runtimeManifest.allowedTools },
      metadata: r.metadata.user ?? {},
      createdAt: r.createdAt.toISOString(),
      ended: r.status === 'completed' || r.status === 'cancelled' ? endedView(r) : null,
    };
  }
}
