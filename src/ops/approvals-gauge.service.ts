import { Injectable, Logger, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { DataSource } from 'typeorm';
import { APPROVAL_KINDS } from '../approvals/approval-request.entity.js';
import { Clock } from '../common/clock.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { MetricsService } from '../metrics/metrics.service.js';

export const APPROVALS_GAUGE_INTERVAL_MS = 15_000;

/**
 * Keeps `approvals_pending{kind}` current: a count of pending approval requests
 * across every org, by kind, refreshed every 15 s. It reads the database rather than
 * counting in memory, so every replica reports the same truth. An approval past
 * its expiry is not counted, though the sweep may not have written it down yet:
 * every read (the expert's queue, the approval itself) shows it expired from
 * the moment it passes, and so does the gauge.
 */
@Injectable()
export class ApprovalsGaugeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly task = new PeriodicTask('approvals_pending refresh', APPROVALS_GAUGE_INTERVAL_MS, () => this.refresh(), new Logger('ApprovalsGauge'));

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
}
