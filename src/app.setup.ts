import type { Server } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { Express, NextFunction, Request, Response } from 'express';
import { Logger } from 'nestjs-pino';
import { AppError } from './common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from './config/app-config.js';
import { sendProblem } from './common/errors/problem.filter.js';
import { correlationMiddleware } from './common/http/correlation.js';
import { jsonBodyMiddleware } from './common/http/json-body.js';
import { withProblemResponses } from './common/http/openapi.js';
import { canonicalIdsInPath, nulInUrlGuard } from './common/http/url-guard.js';
import { createValidationPipe } from './common/http/validation.js';
import { MetricsService } from './metrics/metrics.service.js';

interface HttpDrain {
  stopping: boolean;
  /** Requests past the drain check and not yet answered. */
  inFlight: Set<Response>;
}

const drains = new WeakMap<INestApplication, HttpDrain>();

/**
 * The HTTP side of a stop, before app.close(). Node's server.close() only closes the connections idle at that
 * instant: one busy then stays open and is served request after request — new tool calls included — for as long
 * as a keep-alive client keeps sending, so the drain never ends. From here on every new request is answered 503
 * GATEWAY_STOPPING (readyz included: the load balancer stops sending), answers still in flight close their
 * connection after them, and idle connections are closed now. What is in flight completes and is recorded.
 */
export function beginHttpDrain(app: INestApplication): void {
  const drain = drains.get(app);
  if (!drain || drain.stopping) return;
  drain.stopping = true;
  for (const res of drain.inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
  (app.getHttpServer() as Server).closeIdleConnections();
}

/** The same HTTP setup for main.ts and every e2e test (STACK.md gotcha 15). */
export function configureApp(app: INestApplication): void {
  const express = app.getHttpAdapter().getInstance() as Express;
  express.disable('x-powered-by');
  express.set('query parser', 'simple');
  // req.ip: the client's address as the last TRUST_PROXY_HOPS proxies report it (X-Forwarded-For), else the peer's.
  const hops = app.get<AppConfig>(APP_CONFIG).TRUST_PROXY_HOPS;
  if (hops > 0) express.set('trust proxy', hops);
  app.useLogger(app.get(Logger));
  const metrics = app.get(MetricsService);
  const drain: HttpDrain = { stopping: false, inFlight: new Set() };
  drains.set(app, drain);
  app.use(correlationMiddleware);
  // Right after the correlation id (the 503 carries it), ahead of everything that could start work.
  app.use((req: Request & { correlationId?: string }, res: Response, next: NextFunction) => {
    if (drain.stopping) {
      // Connection: close makes Node end the connection after this answer: the client reconnects elsewhere.
      res.setHeader('Connection', 'close');
      const stop = new AppError('GATEWAY_STOPPING', 'the gateway is stopping and starts no new request; send it again (another replica answers it)', {
        retryAfterSeconds: 1,
      });
      sendProblem(res, stop, req.correlationId ?? 'unknown');
      return;
    }
    drain.inFlight.add(res);
    res.once('close', () => drain.inFlight.delete(res));
    next();
  });
  // Every /v1 answer is for one key's eyes (full tool results, keys shown once): no cache may keep it.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (/^\/v1\//i.test(req.path)) res.setHeader('Cache-Control', 'no-store');
    next();
  });
  app.use((req: Request, res: Response, next: NextFunction) => {
    const start = performance.now();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, (performance.now() - start) / 1000);
    });
    next();
  });
  app.use(nulInUrlGuard);
  app.use(canonicalIdsInPath);
  app.use(jsonBodyMiddleware);
  app.useGlobalPipes(createValidationPipe());

  const doc = withProblemResponses(SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Tool Gateway')
      .setDescription(
        'Governed, audited tool calls from AI agents to vendor APIs. Errors are application/problem+json ' +
          '{type, title, status, detail, code, correlationId}. Ids are UUIDs, case-insensitive in paths, filters and bodies, ' +
          'and always answered in lower case. See README and API.md for the full contract.',
      )
      .setVersion('0.1.0')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'opaque API key (tgw_…)', description: 'Authorization: Bearer <API key>' })
      .build(),
  ));
  SwaggerModule.setup('docs', app, doc, { jsonDocumentUrl: 'openapi.json' });
}
