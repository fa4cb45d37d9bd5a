import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';

/**
 * Every answer says its Content-Type is meant (`nosniff`): the unredacted vendor results hold text third parties
 * wrote (order notes, names), and no browser may read one as anything but what it is labelled.
 */
export function noSniff(_req: Request, res: Response, next: NextFunction): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  next();
}

/** What the /docs page loads (@nestjs/swagger's page and swagger-ui-dist's files it names), and the page itself. */
const DOCS_FILES: ReadonlySet<string> = new Set([
  '/',
  '/index.html',
  '/swagger-ui.css',
  '/swagger-ui-bundle.js',
  '/swagger-ui-standalone-preset.js',
  '/swagger-ui-init.js',
  '/favicon-32x32.png',
  '/favicon-16x16.png',
]);

/**
 * The /docs page is where an operator pastes a key ("Authorize") and sends requests ("Try it out"): no other site
 * may frame it (clickjacking) and it loads and talks to nothing but this origin (its one inline <style> aside). Only
 * the files it loads are served: SwaggerModule mounts the whole swagger-ui-dist folder (its package.json naming the
 * version, source maps, a demo initializer pointing at petstore.swagger.io), which this answers 404 like any path
 * that is not a route. Mounted at /docs.
 */
export function docsGuard(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  if (!DOCS_FILES.has(req.path)) return sendProblem(res, new AppError('NOT_FOUND', 'no such route'), req.correlationId ?? 'unknown');
  // Each file is sent whole: serve-static's answers to an unsatisfiable Range (416) or a failed If-Match /
  // If-Unmodified-Since (412) are errors no problem code names, which any anonymous caller turned into 500s and
  // error-level "unhandled error" lines at will. A revalidation (If-None-Match, If-Modified-Since: 304) still works.
  for (const header of ['range', 'if-range', 'if-match', 'if-unmodified-since']) delete req.headers[header];
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
      "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  );
  res.setHeader('X-Frame-Options', 'DENY');
  next();
}
