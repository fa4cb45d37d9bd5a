import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { PeriodicTask } from '../common/periodic-task.js';
import { MetricsService } from '../metrics/metrics.service.js';

export const APPROVALS_GAUGE_INTERVAL_MS = 15_000;

/**
 * Keeps `approvals_pending` current: a count of pending approval requests
 * across every org, refreshed every 15 s. It reads the database rather than
 * counting in memory, so every replica reports the same truth.
 */
@Injectable()
export class ApprovalsGaugeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly task = new PeriodicTask('approvals_pending refresh', APPROVALS_GAUGE_INTERVAL_MS, () => this.refresh(), new Logger('ApprovalsGauge'));

  constructor(
    private readonly ds: DataSource,
    private readonly metrics: MetricsService,
  ) {}

  onApplicationBootstrap(): void {
    this.task.start(0);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }

  async refresh(): Promise<number> {
    const [{ n }] = (await this.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE status = 'pending'`)) as [{ n: number }];
    this.metrics.pendingApprovals.set(n);
    return n;
  }
}
