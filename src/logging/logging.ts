import type { IncomingMessage, ServerResponse } from 'node:http';
import { pinoHttp, type HttpLogger, type Options } from 'pino-http';
import { levels, type DestinationStream } from 'pino';
import { clientAddressOf } from '../auth/client-address.js';
import type { AuthenticatedRequest } from '../auth/principal.js';
import type { AppConfig } from '../config/app-config.js';
import { redactInput } from '../redaction/redaction.service.js';
import { databaseCauseOf, problemCodeOf } from '../common/errors/answered-problem.js';
import { saneRequestId } from '../common/http/correlation.js';
import { answeredToolCall } from './answered-call.js';
import { write as writeOutput } from './output-streams.js';

type Req = IncomingMessage & AuthenticatedRequest & { correlationId?: string; originalUrl?: string; ip?: string };

/** Only these request facts are logged: no headers (Authorization, keys), no bodies, no query values. */
type Listener = (line: string) => void;
const listeners = new Set<Listener>();
let echo = true;

/**
 * Where every log line goes. nestjs-pino keeps one logger per process (a
 * module-level singleton), so instead of a stream per app there is one sink:
 * stdout, plus any listeners (tests capture lines to scan them for leaks).
 */
export const logSink: DestinationStream = {
  write(msg: string): void {
    if (echo) writeOutput('stdout', msg);
    for (const l of listeners) l(msg);
  },
};

/** Tests: collect every log line from now on. */
export function captureLogs(): { lines: string[]; stop: () => void } {
  const lines: string[] = [];
  const l: Listener = (line) => lines.push(line);
  listeners.add(l);
  return { lines, stop: () => listeners.delete(l) };
}

/** Tests: keep logs off the terminal (they are still captured). */
export function setLogEcho(on: boolean): void {
  echo = on;
}

/** Probes and scrapes, asked every few seconds: never logged. */
const QUIET_PATHS = new Set(['/healthz', '/metrics']);

/**
 * The path of a request target as written (what the router matched), and nothing else: not its query, and not what
 * an absolute-form target (`GET http://user:password@host/path`) carries before the path — userinfo is a
 * credential. No dot segment is resolved: `/v1/x/../metrics` was routed (and answered 404) as it is.
 */
export function requestPath(url: string | undefined): string {
  let target = url ?? '';
  const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(target);
  if (absolute) target = target.slice(absolute[0].length);
  const end = target.search(/[?#]/);
  const path = end < 0 ? target : target.slice(0, end);
  return path.startsWith('/') ? path : `/${path}`;
}

/**
 * The path as the request log writes it: requestPath, with what redaction finds in it redacted (an admin who pasted
 * a token where a name belongs, `/feature-flags/shpat_…`). Ids stay as they are; a few µs per request.
 */
export function loggedPath(url: string | undefined): string {
  return redactInput(requestPath(url)) as string;
}

/**
 * Who sent a request, for its "request completed" line: the address the rate limiters meter it by, and the ids of the
 * key it authenticated with (kept on the request by the AuthGuard: no look-up here), so a client hammering the gateway
 * can be told apart and its key revoked. Never the key or a header.
 */
export function requestCaller(req: Req): { client: string; keyId?: string; orgId?: string | null; keyRevoked?: true } {
  const key = req.authenticatedKey;
  return { client: clientAddressOf(req), ...(key ? { keyId: key.keyId, orgId: key.orgId, ...(key.revoked ? { keyRevoked: true as const } : {}) } : {}) };
}

/**
 * The request id a load balancer or proxy in front gave the request (nginx `$request_id`, Envoy, Heroku's router:
 * X-Request-Id), beside the correlation id, so its access-log line can be joined to the gateway's; only a sane one
 * (the correlation id's own rule, saneRequestId: none holding a credential's shape), never echoed.
 */
export function balancerRequestId(req: IncomingMessage): { requestId?: string } {
  const id = req.headers['x-request-id'];
  return saneRequestId(id) ? { requestId: id } : {};
}

/**
 * The problem code of an error answer (sendProblem), so its line tells a 409 of one kind from another; for a 503
 * DATABASE_UNAVAILABLE also why (databaseCode: the SQLSTATE or driver code; databaseCause: our phrase for it).
 */
function answeredCode(res: ServerResponse): { code?: string; databaseCode?: string; databaseCause?: string } {
  const code = problemCodeOf(res);
  if (code === undefined) return {};
  const db = databaseCauseOf(res);
  return db === undefined ? { code } : { code, databaseCode: db.code, databaseCause: db.cause };
}

/**
 * pino-http puts an Error on the line of every 5xx it was not handed one for ("failed with status code 503", with
 * pino-http's own stack): nothing about the request. The ProblemFilter has logged a real error (with its stack) already.
 */
function withoutStatusError(line: object): object {
  const { err, ...rest } = line as { err?: { message?: unknown } };
  return err && typeof err.message === 'string' && err.message.startsWith('failed with status code ') ? rest : line;
}

/**
 * Responses whose answer was written on the socket outside Express (bootstrap.ts: the 408 to a body that stopped
 * arriving) and logged there, with the status given: pino-http's own line when the connection closes would be a
 * second one, "request aborted" with no status.
 */
const answeredOutside = new WeakSet<ServerResponse>();

/** bootstrap.ts: this response's answer was written on its socket and logged; pino-http logs nothing for it. */
export function markAnsweredOutsideExpress(res: ServerResponse): void {
  answeredOutside.add(res);
}

export function pinoHttpOptions(config: AppConfig): [Options, DestinationStream] {
  // The lowest level written ('silent' writes nothing).
  const threshold = config.LOG_LEVEL === 'silent' ? Infinity : levels.values[config.LOG_LEVEL];
  const options: Options = {
    level: config.LOG_LEVEL,
    genReqId: (req: Req) => req.correlationId ?? 'unknown',
    customProps: (req: Req) => ({ correlationId: req.correlationId, ...balancerRequestId(req) }),
    customSuccessObject: (req: Req, res: ServerResponse, line: object) => ({ ...requestCaller(req), ...answeredCode(res), ...answeredToolCall(res), ...line }),
    customErrorObject: (req: Req, res: ServerResponse, _err: Error, line: object) => ({
      ...requestCaller(req),
      ...answeredCode(res),
      ...answeredToolCall(res),
      ...withoutStatusError(line),
    }),
    serializers: {
      req: (req: { method?: string; url?: string }) => ({ method: req.method, path: loggedPath(req.url) }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
    redact: {
      paths: ['req.headers', 'res.headers', '*.authorization', '*.accessToken', '*.clientSecret', '*.refreshToken', '*.secretKey', '*.password', '*.token'],
      censor: '[REDACTED]',
    },
    // A readiness probe that passes says nothing (Docker's HEALTHCHECK asks every 10 s); one that fails is logged. A line
    // below LOG_LEVEL is 'silent' here, not left to the logger: pino-http builds the line (the caller, the response
    // time, the bindings) before the logger drops it, about half of the request logger's work at warn.
    customLogLevel: (req: IncomingMessage, res: ServerResponse, err?: Error) => {
      const level = answeredOutside.has(res) ? 'silent' : err || res.statusCode >= 500 ? 'error' : res.statusCode < 400 && requestPath(req.url) === '/readyz' ? 'silent' : 'info';
      return level === 'silent' || levels.values[level] < threshold ? 'silent' : level;
    },
    autoLogging: { ignore: (req: IncomingMessage) => QUIET_PATHS.has(requestPath(req.url)) },
  };
  return [options, logSink];
}

/**
 * The request log: a "request completed" line for every answer, and req.log (the request's bindings) for the logs
 * made while answering. configureApp mounts it right after the correlation id, not nestjs-pino: Nest mounts its
 * module middleware after every app.use, so the answers given before the routes (503 GATEWAY_STOPPING during a
 * drain, %00 in the URL, a bad % escape, a body over the limit) would go unlogged. nestjs-pino (useExisting) only
 * carries req.log into the handlers' PinoLogger.
 */
export function requestLog(config: AppConfig): HttpLogger {
  return pinoHttp(...pinoHttpOptions(config));
}
