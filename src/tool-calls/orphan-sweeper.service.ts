import { Inject, Injectable, Logger, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';

const SWEEP_EVERY_MS = 60_000;
/** Orphaned calls settled per statement (see sweep). */
const SWEEP_BATCH = 1_000;
/** Call ids the sweep's log line names (the longest-running ones settled first); the rest are counted. */
export const SWEEP_LOGGED_IDS = 20;
/** What the sweep writes as the call's error text; an outcome that arrives late recognises the sweep's verdict by it. */
export const ORPHANED_TEXT = 'the process running this call stopped before recording its outcome';

/**
 * Calls left `running` by a process that died (kill -9, OOM, a lost node)
 * would stay running forever. At start-up and every minute, calls running
 * longer than the vendor timeout plus a margin become `indeterminate /
 * OUTCOME_UNKNOWN` with an event: nobody knows whether the vendor acted, so
 * they are never retried automatically (ops reconcile them), and charged the
 * action's cost, as an outcome recorded `indeterminate` is (a request that may
 * have been sent counts as sent). Younger running
 * calls may belong to a live replica and are left alone. A live replica that
 * kept the call's outcome through a long database outage records it as an
 * event afterwards (ToolCallLedger.writeOutcome), for the reconcile.
 */
@Injectable()
export class OrphanSweeperService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('OrphanSweeper');
  /** Each catalog action's cost, as the sweep's three parallel arrays (tool, action, cents): the catalog is fixed at start. */
  private readonly costs: [string[], string[], number[]];
  private readonly task = new PeriodicTask('orphan sweep', SWEEP_EVERY_MS, () => this.pass(), this.log);

  constructor(
    private readonly sql: Sql,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    catalog: ToolCatalogService,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task.haltOn(phase?.signal);
    const actions = catalog.list().flatMap((tool) => tool.actions.map((action) => ({ tool: tool.name, action: action.name, cost: action.costCents })));
    this.costs = [actions.map((a) => a.tool), actions.map((a) => a.action), actions.map((a) => a.cost)];
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.sweep().catch((err: unknown) => this.log.warn(`start-up sweep failed: ${loggableErrorText(err)}`));
    this.task.start();
  }

  /** The periodic pass: orphaned calls, then expired refund leases. */
  async pass(): Promise<void> {
    await this.sweep();
    await this.purgeExpiredLeases();
  }

  /**
   * Deletes refund leases past their end by more than an hour, a batch per statement; returns how many. A refund whose
   * outcome may still land keeps its order's lease on purpose, until it expires; nothing else ever deleted the row
   * then (only its holder's release, the order's next refund taking it over, or a reconcile), so the table grew by a
   * row per such refund, for good. An expired lease holds nothing: the order's next refund takes it over as it is.
   * The end is checked again on the row deleted, so one taken over meanwhile stays.
   */
  async purgeExpiredLeases(batch = SWEEP_BATCH): Promise<number> {
    let total = 0;
    for (;;) {
      const [{ n }] = await this.sql.query<{ n: number }>(
        `WITH gone AS (
           DELETE FROM shopify_refund_leases l
            USING (SELECT shop_domain, order_id FROM shopify_refund_leases WHERE lease_until < now() - interval '1 hour' LIMIT $1::int) d
            WHERE l.shop_domain = d.shop_domain AND l.order_id = d.order_id AND l.lease_until < now() - interval '1 hour'
           RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [batch],
      );
      total += n;
      if (n < batch) return total;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }

  /**
   * Marks orphaned running calls indeterminate; returns how many. In batches of `batch` (a test passes a small
   * one), the longest-running first (the order the running-calls index gives, and the one the sweep always locked
   * them in) and with the lock the UPDATE takes anyway (FOR NO KEY UPDATE: rows referring to the call are not held
   * up), each a statement and a transaction of its own: one statement over a large backlog (a
   * crash in the middle of a flood) could outlast the statement timeout on every pass and never catch up, as the
   * results purge (ResultsStore.purgeExpired). A failed batch ends the pass; those before it stay committed.
   * A call is orphaned past the time its starting replica recorded it may hold it (stale_after_ms: that replica's
   * VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS), not this replica's: in a roll that changed the timeout, a replica
   * with the shorter one took the calls another still had at their vendors. Calls started before it was recorded
   * (null) by this replica's own.
   */
  async sweep(batch = SWEEP_BATCH): Promise<number> {
    const staleAfterMs = this.config.VENDOR_TIMEOUT_MS + this.config.STALE_RUNNING_MARGIN_MS;
    let total = 0;
    const ids: string[] = [];
    try {
      for (;;) {
        const [{ n, some }] = await this.sql.query<{ n: number; some: string[] | null }>(
          `WITH due AS MATERIALIZED (
             SELECT id FROM tool_calls
              WHERE status = 'running'
                AND started_at < now() - make_interval(secs => COALESCE(stale_after_ms, $1::int)::double precision / 1000)
              ORDER BY started_at, id LIMIT $6::int FOR NO KEY UPDATE),
           tc AS (
             UPDATE tool_calls SET status = 'indeterminate', error_code = 'OUTCOME_UNKNOWN', http_status = 200,
                    error_text = $2,
                    cost_cents = COALESCE((SELECT c.cost FROM unnest($3::text[], $4::text[], $5::int[]) AS c(tool, action, cost)
                                            WHERE c.tool = tool_calls.tool_name AND c.action = tool_calls.action), 0),
                    finished_at = now(), updated_at = now()
              WHERE id IN (SELECT id FROM due) AND status = 'running'
              RETURNING id, org_id, run_id, tool_name, action, action_digest, started_at, cost_cents),
           -- an approved call's raw input goes with its run, as when its outcome is recorded
           ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id),
           ev AS (
             INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
             SELECT gen_random_uuid(), org_id, 'tool_call.indeterminate', run_id, id,
                    jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'errorCode', 'OUTCOME_UNKNOWN', 'reason', 'orphaned',
                                       'costCents', cost_cents)
               FROM tc)
           SELECT count(*)::int AS n, (array_agg(id ORDER BY started_at, id))[1:$7::int]::text[] AS some FROM tc`,
          [staleAfterMs, ORPHANED_TEXT, ...this.costs, batch, SWEEP_LOGGED_IDS],
        );
        total += n;
        for (const id of some ?? []) if (ids.length < SWEEP_LOGGED_IDS) ids.push(id);
        if (n === 0 || n < batch) return total;
      }
    } finally {
      // The ids let on-call reconcile without a ledger query first (POST /v1/tool-calls/:id/reconcile); past the first ones, a flood is counted.
      if (total > 0) this.log.warn({ count: total, toolCallIds: ids }, 'orphaned running tool calls marked indeterminate');
    }
  }
}
