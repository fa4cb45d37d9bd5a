import { Controller, Get, Req, Res, type OnApplicationShutdown } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { DataSource } from 'typeorm';
import { Public } from '../auth/auth.decorators.js';
import { AppError } from '../common/errors/app-error.js';
import { rememberDatabaseCause } from '../common/errors/answered-problem.js';
import { databaseCause } from '../common/errors/database-errors.js';
import { sendProblem } from '../common/errors/problem.filter.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { DatabaseProbe } from './database-probe.js';
import { StopNotice } from './stop-notice.js';

/**
 * Why the probe could not reach the database, beyond what databaseCause knows (an outage's codes): the server's refusals
 * of the gateway's own login or database, which only a probe meets on a fresh connection. SQLSTATE class 28 and 3D000.
 */
const PROBE_REFUSALS = new Map([
  ['28P01', 'password authentication failed (DATABASE_URL)'],
  ['28000', 'login refused by the server (pg_hba.conf, or no such role)'],
  ['3D000', 'no such database (DATABASE_URL)'],
  ['42501', 'permission denied'],
]);

/**
 * The probe's failure as the 503 line's databaseCode and databaseCause (as every DATABASE_UNAVAILABLE line has): our phrase
 * for its code, never its message (a server's message may quote what it was sent). A code we have no phrase for is
 * named as it is (a SQLSTATE or Node error code: a fixed set of letters and digits).
 */
export function probeFailureCause(err: unknown): { code: string; cause: string } {
  const known = databaseCause(err);
  if (known) return known;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code)) return { code, cause: PROBE_REFUSALS.get(code) ?? 'the readiness probe failed' };
  return { code: 'unknown', cause: 'the readiness probe failed' };
}

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
    // Why it failed goes on the 503's own line (databaseCode, databaseCause): refused, DNS, a wrong password, too many connections.
    const database = await this.probe.ping().catch((err: unknown) => (rememberDatabaseCause(res, probeFailureCause(err)), 'down' as const));
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
