import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { MetricsService } from '../metrics/metrics.service.js';

export const APPROVALS_GAUGE_INTERVAL_MS = 15_000;

/**
 * Keeps `approvals_pending` current: a count of pending approval requests
 * across every org, refreshed every 15 s. It reads the database rather than
 * counting in memory, so every replica reports the same truth.
 */
@Injectable()
export class ApprovalsGaugeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('ApprovalsGauge');
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly ds: DataSource,
    private readonly metrics: MetricsService,
  ) {}

  onApplicationBootstrap(): void {
    const tick = (): void => {
      this.running = this.refresh()
        .catch((err: unknown) => this.log.warn(`approvals_pending refresh failed: ${err instanceof Error ? err.message : String(err)}`))
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, APPROVALS_GAUGE_INTERVAL_MS).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  async refresh(): Promise<number> {
    const [{ n }] = (await this.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE status = 'pending'`)) as [{ n: number }];
    this.metrics.pendingApprovals.set(n);
    return n;
  }
}
