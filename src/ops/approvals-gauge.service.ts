import { Injectable, Logger, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { DataSource } from 'typeorm';
import { APPROVAL_KINDS } from '../approvals/approval-request.entity.js';
import { Clock } from '../common/clock.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { MetricsService } from '../metrics/metrics.service.js';

export const APPROVALS_GAUGE_INTERVAL_MS = 15_000;

/** How many calls are indeterminate, and the age in seconds of the oldest ($1: now); read off tool_calls_unsettled_idx. */
export const INDETERMINATE_GAUGE_SQL = `SELECT count(*)::int AS n, GREATEST(0, EXTRACT(EPOCH FROM ($1::timestamptz - min(created_at))))::float8 AS age
  FROM tool_calls WHERE status = 'indeterminate'`;

/**
 * Keeps `approvals_pending{kind}`, `tool_calls_indeterminate` and `tool_calls_indeterminate_oldest_seconds` current.
 *
 * `approvals_pending{kind}`: a count of pending approval requests
 * across every org, by kind, refreshed every 15 s. It reads the database rather than
 * counting in memory, so every replica reports the same truth. An approval past
 * its expiry is not counted, though the sweep may not have written it down yet:
 * every read (the expert's queue, the approval itself) shows it expired from
 * the moment it passes, and so does the gauge.
 *
 * The indeterminate gauges are the reconcile work list's size and age (`GET /v1/tool-calls?status=indeterminate`):
 * `tool_calls_total{status="indeterminate"}` counts answers as they happen, on the replica that gave them, and calls the
 * orphan sweep marks are not in it; an alert on the counter's rate forgets a call nobody settled. Read from the partial
 * index of unsettled calls (tool_calls_unsettled_idx: index-only, the indeterminate rows alone).
 */
@Injectable()
export class ApprovalsGaugeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly task = new PeriodicTask(
    'approvals_pending refresh',
    APPROVALS_GAUGE_INTERVAL_MS,
    async () => {
      await this.refresh();
      await this.refreshIndeterminate();
    },
    new Logger('ApprovalsGauge'),
  );

  constructor(
    private readonly ds: DataSource,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task.haltOn(phase?.signal);
  }

  onApplicationBootstrap(): void {
    this.task.start(0);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }

  /**
   * By kind: an expert's approval is the experts' queue to staff, a client's waits on the customer (an expert cannot
   * decide it), so one count would page for a queue nobody on staff can shorten. Both series are always set, 0 too.
   * The total, for callers that want one.
   */
  async refresh(): Promise<number> {
    const rows = (await this.ds.query(
      `SELECT kind, count(*)::int AS n FROM approval_requests WHERE status = 'pending' AND expires_at > $1 GROUP BY kind`,
      [this.clock.now()],
    )) as { kind: string; n: number }[];
    const byKind = new Map(rows.map((r) => [r.kind, r.n]));
    for (const kind of APPROVAL_KINDS) this.metrics.pendingApprovals.set({ kind }, byKind.get(kind) ?? 0);
    return rows.reduce((total, r) => total + r.n, 0);
  }

  /** Sets the two indeterminate gauges; returns what it set. */
  async refreshIndeterminate(): Promise<{ count: number; oldestSeconds: number }> {
    const [row] = (await this.ds.query(INDETERMINATE_GAUGE_SQL, [this.clock.now()])) as { n: number; age: number | null }[];
    const result = { count: row.n, oldestSeconds: Math.round(row.age ?? 0) };
    this.metrics.indeterminateCalls.set(result.count);
    this.metrics.indeterminateOldest.set(result.oldestSeconds);
    return result;
  }
}
