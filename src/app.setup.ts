import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { Express, NextFunction, Request, Response } from 'express';
import { Logger } from 'nestjs-pino';
import { correlationMiddleware } from './common/http/correlation.js';
import { jsonBodyMiddleware } from './common/http/json-body.js';
import { withProblemResponses } from './common/http/openapi.js';
import { canonicalIdsInPath, nulInUrlGuard } from './common/http/url-guard.js';
import { createValidationPipe } from './common/http/validation.js';
import { MetricsService } from './metrics/metrics.service.js';

/** The same HTTP setup for main.ts and every e2e test (STACK.md gotcha 15). */
export function configureApp(app: INestApplication): void {
  const express = app.getHttpAdapter().getInstance() as Express;
  express.disable('x-powered-by');
  express.set('query parser', 'simple');
  app.useLogger(app.get(Logger));
  const metrics = app.get(MetricsService);
  app.use(correlationMiddleware);
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
