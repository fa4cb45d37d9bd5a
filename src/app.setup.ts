import type { Server } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { docsGuard, noSniff } from './common/http/response-hardening.js';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { Express, NextFunction, Request, Response } from 'express';
import { Logger } from 'nestjs-pino';
import { APP_CONFIG, type AppConfig } from './config/app-config.js';
import { dropBehindClose } from './common/http/closing-connection.js';
import { correlationMiddleware } from './common/http/correlation.js';
import { hostRequired } from './common/http/host-required.js';
import { HttpDrain } from './common/http/http-drain.js';
import { jsonBodyMiddleware } from './common/http/json-body.js';
import { withProblemResponses } from './common/http/openapi.js';
import { transferCodingGuard } from './common/http/transfer-coding.js';
import { canonicalIdsInPath, nulInUrlGuard } from './common/http/url-guard.js';
import { createValidationPipe } from './common/http/validation.js';
import { refuseBadTarget, toOriginForm } from './common/http/request-target.js';
import { requestLog } from './logging/logging.js';
import { MetricsService } from './metrics/metrics.service.js';
import { ToolCallResultsService } from './tool-calls/tool-call-results.service.js';
import { ShutdownPhase } from './common/shutdown-phase.js';
import { ToolCallBatchService } from './tool-calls/batch/tool-call-batch.service.js';

const drains = new WeakMap<INestApplication, HttpDrain>();

/**
 * The HTTP side of a stop, before app.close() (HttpDrain says how): from here on every request not yet started is
 * answered 503 GATEWAY_STOPPING (readyz included: the load balancer stops sending), answers still in flight close
 * their connection after them, connections idle or with a request half sent are closed now, and one that holds
 * on (a body trickling in, an answer not read) is closed within a bound. What is in flight completes and is recorded.
 */
export function beginHttpDrain(app: INestApplication): void {
  drains.get(app)?.begin();
  // Background work (sweeps, flushes, the gauge) starts no new run from here: see ShutdownPhase.
  app.get(ShutdownPhase, { strict: false }).begin();
  // At once, with the HTTP side: a batch still running starts no further item (ToolCallBatchService.stopStarting),
  // and the open long-polls are answered, not held until the shutdown hooks reach theirs.
  app.get(ToolCallBatchService, { strict: false }).stopStarting();
  app.get(ToolCallResultsService, { strict: false }).answerWaiting();
}

/** The same HTTP setup for main.ts and every e2e test (STACK.md gotcha 15). */
export function configureApp(app: INestApplication): void {
  const express = app.getHttpAdapter().getInstance() as Express;
  express.disable('x-powered-by');
  // No automatic weak ETags: an answer's ETag is a tag the gateway evaluates on writes (the policy and permission
  // sets'), never one a client could send back in If-Match or If-None-Match to no effect (ConditionalWritesGuard).
  express.set('etag', false);
  // Nor may a client's If-None-Match: * turn an answer without a tag into a 304 with no body (Express's req.fresh
  // takes "*" as a match whatever the answer): a cache in front of an agent that sends it got no toolResult, and
  // every GET an undocumented 304. Fresh only where the gateway set an ETag (the policy and permission sets).
  const expressFresh = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(express.request) as object, 'fresh')?.get;
  if (expressFresh) {
    Object.defineProperty(express.request, 'fresh', {
      configurable: true,
      get(this: Request): boolean {
        return this.res?.getHeader('ETag') !== undefined && (expressFresh.call(this) as boolean);
      },
    });
  }
  express.set('query parser', 'simple');
  // req.ip: the client's address as the last TRUST_PROXY_HOPS proxies report it (X-Forwarded-For), else the peer's.
  const config = app.get<AppConfig>(APP_CONFIG);
  const hops = config.TRUST_PROXY_HOPS;
  if (hops > 0) express.set('trust proxy', hops);
  app.useLogger(app.get(Logger));
  const metrics = app.get(MetricsService);
  // First of the server's 'request' listeners: the router, the request log and every check read one origin-form target.
  (app.getHttpServer() as Server).prependListener('request', toOriginForm);
  const drain = new HttpDrain(app.getHttpServer() as Server, config.VENDOR_TIMEOUT_MS, config.HTTP_PIPELINE_DEPTH, config.HTTP_REQUEST_TIMEOUT_MS);
  drains.set(app, drain);
  app.use(dropBehindClose); // a request pipelined behind a refusal that closes its connection is not run
  app.use(correlationMiddleware);
  app.use(noSniff); // every answer from here on, the refusals before the routes included
  // Every /v1 answer is for one key's eyes (full tool results, keys shown once): no cache may keep it. Here, ahead of
  // the refusals before the routes (a second Host, a transfer coding, the drain's 503), which are /v1 answers too.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (/^\/v1\//i.test(req.path)) res.setHeader('Cache-Control', 'no-store');
    next();
  });
  // The request log and the metrics see every answer given after the correlation id, the refusals below included.
  app.use(requestLog(config));
  app.use((req: Request, res: Response, next: NextFunction) => {
    const start = performance.now();
    res.on('finish', () => {
      // The route's template as documented (`/v1/runs/:runId/tool-calls:batch`), not as Express spells it with its escape (`\:`).
      const route = (req.route as { path?: string } | undefined)?.path?.replace(/\\(.)/g, '$1') ?? 'unmatched';
      metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, (performance.now() - start) / 1000);
    });
    next();
  });
  // Requests framed in a way we cannot read as the client meant: one Host field (RFC 9112 §3.2), only chunked.
  app.use(hostRequired);
  app.use(transferCodingGuard);
  app.use(refuseBadTarget);
  // Ahead of everything that could start work (the 503 carries the correlation id, and is logged and counted).
  app.use(drain.refuseEarly);
  app.use(nulInUrlGuard);
  app.use(canonicalIdsInPath);
  app.use(jsonBodyMiddleware);
  // A request starts here, its body read: one still uploading when the drain began is refused, not started late.
  app.use(dropBehindClose);
  app.use(drain.admit);
  app.useGlobalPipes(createValidationPipe());

  const doc = withProblemResponses(SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Tool Gateway')
      .setDescription(
        'Governed, audited tool calls from AI agents to vendor APIs. Errors are application/problem+json ' +
          '{type, title, status, detail, code, correlationId}. Ids are UUIDs, case-insensitive in paths, filters and bodies, ' +
          'and always answered in lower case. Preconditions on writes: only the PUTs of policies and tool-permissions answer an ETag and ' +
          'evaluate If-Match and If-None-Match; on any other write an If-Match naming tags is 412, and If-None-Match: * is 412 on every write. ' +
          'See README and API.md for the full contract.',
      )
      .setVersion('0.1.0')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'opaque API key (tgw_…)', description: 'Authorization: Bearer <API key>' })
      .build(),
  ));
  app.use('/docs', docsGuard);
  // The document at /openapi.json only (README): no second copy at /docs-yaml or /docs-json.
  SwaggerModule.setup('docs', app, doc, { jsonDocumentUrl: 'openapi.json', raw: ['json'] });
}
