import { Controller, Get, Req, Res, type OnApplicationShutdown } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { DataSource } from 'typeorm';
import { Public } from '../auth/auth.decorators.js';
import { AppError } from '../common/errors/app-error.js';
import { sendProblem } from '../common/errors/problem.filter.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { DatabaseProbe } from './database-probe.js';
import { StopNotice } from './stop-notice.js';

@ApiExcludeController()
@Public()
@Controller()
export class HealthController implements OnApplicationShutdown {
  readonly probe: DatabaseProbe;

  constructor(
    ds: DataSource,
    private readonly metrics: MetricsService,
    private readonly stopNotice: StopNotice,
  ) {
    this.probe = new DatabaseProbe(ds.options);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.probe.close();
  }

  @Get('healthz')
  health() {
    return { status: 'ok' };
  }

  @Get('readyz')
  async ready(@Req() req: Request & { correlationId?: string }, @Res() res: Response): Promise<void> {
    if (this.stopNotice.announced) {
      // Out of rotation first (SHUTDOWN_DELAY_MS): the requests the load balancer still sends meanwhile are served.
      sendProblem(res, new AppError('GATEWAY_STOPPING', 'the gateway is stopping; not ready', { retryAfterSeconds: 1 }), req.correlationId ?? 'unknown');
      return;
    }
    const database = await this.probe.ping().catch(() => 'down' as const);
    if (database !== 'up') {
      // An error like every other (API.md §8): problem+json with code and correlationId. `database` stays as an
      // extension member; the old `status: "not_ready"` cannot, since `status` is the problem's HTTP status (RFC 9457,
      // API.md §8). Read-only: every call would be refused DATABASE_UNAVAILABLE (SQLSTATE 25006), so out of rotation
      // until a writable server answers.
      const why = database === 'down' ? 'the database is unreachable' : 'the database takes no writes (read-only: a replica or a failover)';
      sendProblem(res, new AppError('DATABASE_UNAVAILABLE', `${why}; not ready`, { retryAfterSeconds: 1, fields: { database } }), req.correlationId ?? 'unknown');
      return;
    }
    res.status(200).json({ status: 'ready', database: 'up' });
  }

  @Get('metrics')
  async scrape(@Res() res: Response): Promise<void> {
    res.setHeader('Content-Type', this.metrics.registry.contentType);
    res.send(await this.metrics.render());
  }
}
