import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Logger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { pino } from 'pino';
import { startTime } from 'pino-http';
import { DataSource } from 'typeorm';
import { migratorOptions } from './db/db-options.js';
import { schemaDrift } from './db/schema-check.js';
import { AppModule, type AppModuleOptions } from './app.module.js';
import { configureApp } from './app.setup.js';
import { balancerRequestId, loggedPath, markAnsweredOutsideExpress, pinoHttpOptions, requestCaller, requestPath } from './logging/logging.js';
import { MetricsService } from './metrics/metrics.service.js';
import { ApiKeysService } from './auth/api-keys.service.js';
import { clientAddressKey, forwardedAddress } from './auth/client-address.js';
import { AppError } from './common/errors/app-error.js';
import type { ErrorCode } from './common/errors/error-codes.js';
import { problemBody } from './common/errors/problem.filter.js';
import { correlationIdOf } from './common/http/correlation.js';
import { bodyLimitFor } from './common/http/json-body.js';
import type { AppConfig } from './config/app-config.js';
import { closeAfterOutsideAnswer } from './common/http/closing-connection.js';
import { targetRefusal, toOriginForm } from './common/http/request-target.js';

import { MigrationsPendingBehindPooler, MigrationsStopped, MigrationTableLockTimeout, runMigrations, SchemaIncomplete } from './db/migration-runner.js';
import { write as writeOutput } from './logging/output-streams.js';

/**
 * What a request the HTTP parser refused before Express ever saw it is answered
 * (Node's default is a bare status with an empty body). The codes are from
 * API.md's list: there is no dedicated code for oversized headers, so 431 carries
 * PAYLOAD_TOO_LARGE (the closest: "too large"); a malformed request is 400
 * BAD_REQUEST, as for a body that does not parse.
 */
function clientErrorProblem(code: string | undefined): { status: number; errorCode: ErrorCode; detail: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, errorCode: 'PAYLOAD_TOO_LARGE', detail: 'the request headers are too large' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, errorCode: 'PAYLOAD_TOO_LARGE', detail: 'the chunk extensions are too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, errorCode: 'BAD_REQUEST', detail: 'the request was not received in time' };
    default:
      return { status: 400, errorCode: 'BAD_REQUEST', detail: 'the request could not be parsed as HTTP' };
  }
}

/** An answer given outside Express, as the request log and http_request_duration_seconds record it. */
export interface OutsideAnswer {
  /** The request answered; none when it did not parse (431, 400, a 408 to headers that never came). */
  req?: IncomingMessage;
  /** The connection's peer, for the line's `client` when there is no request. */
  socket: Duplex;
  status: number;
  correlationId: string;
  /** performance.now() when the request began (as far as the gateway knows). */
  startedAt: number;
  /** The problem code the answer carried (an error answer's line names it, as inside Express). */
  code: ErrorCode;
}

/** Records an answer given outside Express (createGateway's: outsideAnswerRecorder). */
export type RecordOutsideAnswer = (answer: OutsideAnswer) => void;

/**
 * The request log line and the http_request_duration_seconds sample of an answer given outside Express, as
 * configureApp's requestLog (pino-http) and metrics middleware give every other: "request completed" at the level
 * customLogLevel gives its status, the correlation id handed to the client, req {method, path} (the path as loggedPath
 * writes it: no query, no userinfo, redacted), the client, res {statusCode}, responseTime; route "unmatched" (no route
 * ran). Nothing else the client sent. A request that did not parse has no method or path (`req: {}`, method label
 * "unknown"); CONNECT's target is an authority, not a path: only its method.
 */
export function outsideAnswerRecorder(config: AppConfig, metrics: MetricsService): RecordOutsideAnswer {
  const [options, sink] = pinoHttpOptions(config);
  const log = pino({ level: options.level, redact: options.redact }, sink);
  const ignore = typeof options.autoLogging === 'object' ? options.autoLogging.ignore : undefined;
  return ({ req, socket, status, correlationId, startedAt, code }) => {
    const ms = performance.now() - startedAt;
    const route = (req as { route?: { path?: string } } | undefined)?.route?.path ?? 'unmatched';
    metrics.httpDuration.observe({ method: req?.method ?? 'unknown', route, status: String(status) }, ms / 1000);
    if (req && ignore?.(req)) return;
    const level = options.customLogLevel?.(req ?? ({ url: undefined } as IncomingMessage), { statusCode: status } as ServerResponse) ?? 'info';
    if (level === 'silent') return;
    const line = {
      req: !req ? {} : req.method === 'CONNECT' ? { method: req.method } : { method: req.method, path: loggedPath(req.url) },
      correlationId,
      ...(req ? balancerRequestId(req) : {}),
      // A request Express never saw has no req.ip: its client as Express would read it (TRUST_PROXY_HOPS), not the proxy.
      ...(req
        ? { ...requestCaller(req as Parameters<typeof requestCaller>[0]), ...((req as { ip?: string }).ip === undefined ? { client: clientAddressKey(forwardedAddress(req, config.TRUST_PROXY_HOPS)) } : {}) }
        : { client: clientAddressKey((socket as Partial<Socket>).remoteAddress) }),
      code,
      res: { statusCode: status },
      responseTime: Math.round(ms),
    };
    log[level](line, status >= 500 ? 'request errored' : 'request completed');
  };
}

/** The body every other error has; only the HTTP status is Node's (431, 408 and 417 have no code of their own). */
function statusProblem(status: number, errorCode: ErrorCode, detail: string, correlationId: string): string {
  return JSON.stringify({ ...problemBody(new AppError(errorCode, detail), correlationId), status });
}

/**
 * A problem+json answer given outside Express (the request is not run), closing the connection after it: the body a
 * client holds back until its expectation is met would otherwise be read as the next request.
 */
function answerAndClose(req: IncomingMessage, res: ServerResponse, status: number, errorCode: ErrorCode, detail: string, record?: RecordOutsideAnswer): void {
  const startedAt = performance.now();
  const correlationId = correlationIdOf(req);
  const body = statusProblem(status, errorCode, detail, correlationId);
  res.writeHead(status, {
    'Content-Type': 'application/problem+json; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'no-store', // a refusal, of a /v1 upload most often: no cache keeps it (as every /v1 answer)
    'Content-Length': Buffer.byteLength(body),
    'X-Correlation-Id': correlationId,
    Connection: 'close',
  });
  closeAfterOutsideAnswer(req.socket); // nothing pipelined behind it runs: its answer would never be sent
  res.end(body);
  record?.({ req, socket: req.socket, status, correlationId, startedAt, code: errorCode });
}

/**
 * Node's 'checkExpectation': an Expect other than 100-continue (which checkContinue answers).
 * 417 problem+json instead of Node's bare 417.
 */
export function refuseExpectation(req: IncomingMessage, res: ServerResponse, record?: RecordOutsideAnswer): void {
  answerAndClose(req, res, 417, 'BAD_REQUEST', 'the Expect header can only be 100-continue', record);
}

/**
 * Node's 'checkContinue' (Expect: 100-continue), which otherwise invites every upload: a declared body over the
 * route's limit is answered 413 at once, before the client sends it, and its connection closed (else Node would
 * read the whole body to reach the next request). Any other request is invited and runs as usual; emitted as
 * 'request', so HttpDrain counts it like every other.
 */
export function checkContinue(server: Server, record?: RecordOutsideAnswer): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    toOriginForm(req); // emitted as 'request' below, where it finds the target origin-form already
    // A target refused anyway is refused before the client is invited to upload its body for nothing.
    const refusal = targetRefusal(req);
    if (refusal !== undefined) return answerAndClose(req, res, 400, 'BAD_REQUEST', refusal, record);
    const limit = bodyLimitFor(requestPath(req.url));
    if (Number(req.headers['content-length'] ?? 0) > limit) return answerAndClose(req, res, 413, 'PAYLOAD_TOO_LARGE', `body exceeds ${limit} bytes`, record);
    res.writeContinue();
    server.emit('request', req, res);
  };
}

/** Writes a whole problem+json answer on a raw socket and closes it (no ServerResponse exists for it). */
function endWithProblem(socket: Duplex, status: number, errorCode: ErrorCode, detail: string, correlationId: string): void {
  const body = statusProblem(status, errorCode, detail, correlationId);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
      'Content-Type: application/problem+json; charset=utf-8\r\n' +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Correlation-Id: ${correlationId}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
  // end() flushes then closes; a peer that never reads must not keep the socket open.
  setTimeout(() => socket.destroy(), 1_000).unref();
}

type InFlight = ServerResponse & { req?: IncomingMessage & { correlationId?: string }; [startTime]?: number };

/** The response Node has on the socket now (the earliest not yet finished of a pipeline), if any. */
function responseOn(socket: Duplex): InFlight | undefined {
  return (socket as Duplex & { _httpMessage?: InFlight | null })._httpMessage ?? undefined;
}

/** Sockets whose clientError answer is decided (written, or waiting for the answers before it): later ones are dropped. */
const clientErrorAnswered = new WeakSet<Duplex>();

/**
 * Calls `then` once no answer to an earlier request of the connection is outstanding: Node has no response on the
 * socket, or the one it has is to a request still incomplete (the one the error is about: a body that did not
 * parse or stopped coming). Node sends pipelined answers one at a time in request order and puts the next on the
 * socket when the one before finishes, so it waits for each in turn. `then` gets false when the socket closed
 * meanwhile (or the answers before closed it: Connection: close): nothing more can be written. No listener is left.
 */
function afterEarlierAnswers(socket: Duplex, then: (open: boolean) => void): void {
  let waitingOn: InFlight | undefined;
  const stopWaiting = (): void => {
    waitingOn?.off('finish', step);
    waitingOn?.off('close', step);
    waitingOn = undefined;
  };
  const closed = (): void => {
    stopWaiting();
    then(false);
  };
  function step(): void {
    stopWaiting();
    if (socket.destroyed || !socket.writable) {
      socket.off('close', closed);
      return then(false);
    }
    const res = responseOn(socket);
    // Its request parsed whole: an earlier one's answer, still running or being sent (or written already, its 'finish'
    // to come: what is queued behind it goes on the socket then). Node's resOnFinish (the first 'finish' listener)
    // takes it off the socket, and puts the next answer there, before this one's 'finish' listener runs.
    if (res && res.req?.complete === true) {
      waitingOn = res;
      res.once('finish', step);
      res.once('close', step);
      return;
    }
    socket.off('close', closed);
    then(true);
  }
  socket.once('close', closed);
  step();
}

/**
 * Node's 'clientError': answers a minimal problem+json (like every other error,
 * API.md §8) and closes the connection. Writes nothing to a socket that is
 * reset or not writable. On a pipelined connection the answers to the requests before the refused one come first
 * (RFC 9112 §9.3.2): the refusal is written once the last of them has finished, never in the middle of one, so a
 * client never pairs it with a call that ran. Only when the request in flight is the refused one itself (its body
 * did not parse, or stopped coming: 408) and its answer has begun is the connection destroyed instead. An answer
 * given is recorded (record).
 */
export function handleClientError(err: Error & { code?: string }, socket: Duplex, record?: RecordOutsideAnswer): void {
  // Node reports its parser's error again for every later chunk, and at the client's FIN: answered once.
  if (clientErrorAnswered.has(socket)) return;
  const startedAt = performance.now();
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  clientErrorAnswered.add(socket);
  afterEarlierAnswers(socket, (open) => {
    if (!open) return; // closed meanwhile, or by the answers before (Connection: close): nothing to add
    const inFlight = responseOn(socket);
    if (inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    answerClientError(err, socket, inFlight, startedAt, record);
  });
}

/** handleClientError's answer, once nothing earlier on the socket is outstanding. */
function answerClientError(err: Error & { code?: string }, socket: Duplex, inFlight: InFlight | undefined, startedAt: number, record?: RecordOutsideAnswer): void {
  const { status, errorCode, detail } = clientErrorProblem(err.code);
  // A body that stopped arriving (408) is the in-flight request's own: the answer carries its correlation id, the one
  // its request log line has. Anything else (a request that did not parse, one whose headers never came) gets a new
  // one: on a pipelined connection the request in flight is an earlier one, answered or running, not the one refused.
  const req = inFlight?.req;
  const own = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && req !== undefined && !req.complete;
  const correlationId = own ? (req.correlationId ?? correlationIdOf(req)) : randomUUID();
  // The 408's line is its request's own, with the status given, timed from its start (when the request log saw it):
  // pino-http would otherwise log it once the connection closes, as "request aborted" with no status, and the metrics
  // middleware never (its response never finishes).
  if (own && record && inFlight) markAnsweredOutsideExpress(inFlight);
  endWithProblem(socket, status, errorCode, detail, correlationId);
  if (!record) return;
  if (!own) return record({ socket, status, correlationId, startedAt, code: errorCode });
  const seen = inFlight?.[startTime];
  record({ req, socket, status, correlationId, startedAt: seen === undefined ? startedAt : performance.now() - (Date.now() - seen), code: errorCode });
}

/**
 * Node's 'connect': the gateway is no proxy. Without a listener Node destroys the socket without a word; the
 * client gets problem+json instead (400: the API has no 405 code), then the connection closes. Nothing is tunnelled.
 */
export function refuseConnect(req: IncomingMessage, socket: Duplex, record?: RecordOutsideAnswer): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const startedAt = performance.now();
  const correlationId = correlationIdOf(req);
  endWithProblem(socket, 400, 'BAD_REQUEST', 'CONNECT is not supported: the gateway is not a proxy', correlationId);
  record?.({ req, socket, status: 400, correlationId, startedAt, code: 'BAD_REQUEST' });
}

export interface Gateway {
  app: INestApplication;
  generatedAdminKey?: string;
}

export interface GatewayHooks {
  /**
   * The generated platform admin key, as soon as it is committed and before app.init() (the start-up sweeps):
   * a stop during them, or an init() that throws, must not lose it — no later start shows it again.
   */
  onGeneratedAdminKey?: (key: string) => void;
  /** A stop during start-up: given up while waiting for another replica's migrations (createGateway throws MigrationsStopped). */
  stopRequested?: () => boolean;
  /** Start-up found another replica migrating and waits for it. */
  onMigrationWait?: () => void;
  /** A migration gave up waiting for a table lock and is tried again (MigrationWait.onTableLockWait); default: stderr. */
  onMigrationTableLockWait?: (line: string) => void;
}

/** Builds the app, migrates the database and makes sure an admin key exists. Does not listen. */
export async function createGateway(config: AppConfig, opts: AppModuleOptions = {}, hooks: GatewayHooks = {}): Promise<Gateway> {
  const app = await NestFactory.create(AppModule.forRoot(config, opts), { bodyParser: false, bufferLogs: true, abortOnError: false });
  const server = app.getHttpServer() as Server & { requireHostHeader: boolean; connectionsCheckingInterval: number; httpAllowHalfOpen: boolean; maxHeaderSize?: number };
  server.requireHostHeader = false; // hostRequired (configureApp) answers instead, with problem+json
  // Node keeps only the first 2000 fields by default and drops the rest unseen: a second Host, an Authorization or
  // X-Forwarded-For after them. maxHeaderSize still bounds the headers (431).
  server.maxHeadersCount = 0;
  // A client may end its writing side once its request is sent (shutdown(SHUT_WR): `nc -N`, some HTTP/1.0 clients).
  // Node's default aborts the request then and closes without a word, though a tool call may already run at the
  // vendor: the request is answered instead, and the connection ended after the last answer.
  server.httpAllowHalfOpen = true;
  // Node's default gives a request 300 s to arrive: a client trickling a body held its connection and buffer that
  // long. Checked every quarter of the limit (Node's default: every 30 s), set here before listen() starts the check.
  server.requestTimeout = config.HTTP_REQUEST_TIMEOUT_MS;
  server.headersTimeout = Math.min(60_000, config.HTTP_REQUEST_TIMEOUT_MS);
  server.connectionsCheckingInterval = Math.min(30_000, Math.max(250, Math.floor(config.HTTP_REQUEST_TIMEOUT_MS / 4)));
  // An idle keep-alive connection is kept past a load balancer's own idle timeout (ALB, nginx: 60 s): closed first by
  // the gateway (Node's default: 5 s), one the balancer reuses as it closes loses its request, answered 502 there.
  server.keepAliveTimeout = config.HTTP_KEEP_ALIVE_TIMEOUT_MS;
  // Read by Node for each new connection's parser (as http.createServer's maxHeaderSize option): Nest makes the server.
  server.maxHeaderSize = config.HTTP_MAX_HEADER_BYTES;
  configureApp(app);
  // The answers given outside Express are logged and counted like every other (configureApp's request log and metrics).
  const record = outsideAnswerRecorder(config, app.get(MetricsService));
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => handleClientError(err, socket, record));
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => refuseExpectation(req, res, record));
  server.on('checkContinue', checkContinue(server, record));
  server.on('connect', (req: IncomingMessage, socket: Duplex) => refuseConnect(req, socket, record));
  // On connections of their own, without the client-side query timeout (DB_QUERY_TIMEOUT_MS): waiting for
  // another replica's migration, or an index build on a large table, may rightly take longer.
  const migrator = await new DataSource(migratorOptions(config.DATABASE_URL!, config.DB_CONNECTION_MODE)).initialize();
  try {
    await runMigrations(migrator, {
      stopRequested: hooks.stopRequested,
      onWaiting: hooks.onMigrationWait,
      onTableLockWait: hooks.onMigrationTableLockWait ?? ((line) => writeOutput('stderr', `${line}\n`)),
      pooled: config.DB_CONNECTION_MODE === 'pooled',
    });
    // Migrated or not, the schema is read before anything is served: typeorm_migrations says what ran, not what is
    // there now (a `down` run by hand leaves its row). A database newer than this release passes (schemaDrift's
    // `needed`): the roll-back of an upgrade runs the previous release on the new schema.
    const missing = await schemaDrift(migrator, 'needed');
    if (missing.length > 0) throw new SchemaIncomplete(missing);
    await warnUnlessUtf8(migrator);
    await warnOfInvalidIndexes(migrator);
  } catch (err) {
    // Not initialised: only its pools to close.
    if (
      err instanceof MigrationsStopped ||
      err instanceof MigrationsPendingBehindPooler ||
      err instanceof MigrationTableLockTimeout ||
      err instanceof SchemaIncomplete
    ) {
      await app.close().catch(() => undefined);
    }
    throw err;
  } finally {
    await migrator.destroy();
  }
  const { generatedKey } = await app.get(ApiKeysService).ensureBootstrapKey();
  if (generatedKey) hooks.onGeneratedAdminKey?.(generatedKey);
  try {
    await app.init();
  } catch (err) {
    // Nobody else holds the app: what init() started (an approved call the start-up sweep sent) finishes and is
    // recorded, and the pools close, before the error goes on.
    await app.close().catch(() => undefined);
    throw err;
  }
  return { app, generatedAdminKey: generatedKey };
}

/**
 * A database not in UTF8 (SQL_ASCII: initdb's choice with LANG unset) counts lengths in bytes and cuts characters in
 * half: a name of 150 "é" passes the API's 200-character check and breaks the column's CHECK (a 500). Said at every
 * start, not refused: a release must not stop on a database an earlier one ran on (pg_dump and restore into a
 * database created WITH ENCODING 'UTF8' moves it).
 */
/**
 * An index of the gateway's schema left INVALID — by a CREATE INDEX CONCURRENTLY that was interrupted (a hand-built
 * index the migrations then took for built), or a REINDEX CONCURRENTLY — is maintained on every write and used by no
 * plan: the query it serves scans instead. Said at start-up with the fix, one warning naming them all. A unique one is
 * already a start-up failure (schemaDrift); one being built right now is named too (it is invalid until done).
 */
async function warnOfInvalidIndexes(ds: DataSource): Promise<void> {
  const rows = (await ds.query(
    `SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE NOT i.indisvalid AND c.relnamespace = to_regnamespace(quote_ident(current_schema())) ORDER BY c.relname`,
  )) as { name: string }[];
  if (rows.length === 0) return;
  const names = rows.map((r) => r.name).join(', ');
  new Logger('Database').warn(
    `invalid index(es) ${names}: left by an interrupted CREATE INDEX CONCURRENTLY (or one still running), maintained on every write but used by no query; ` +
      'unless a build is still running, rebuild each: REINDEX INDEX CONCURRENTLY <name> (or DROP INDEX CONCURRENTLY and create it again)',
  );
}

async function warnUnlessUtf8(ds: DataSource): Promise<void> {
  const [row] = (await ds.query(`SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()`)) as { encoding: string }[];
  if (row && row.encoding !== 'UTF8') {
    new Logger('Database').warn(
      `the database's encoding is ${row.encoding}, not UTF8: lengths are counted in bytes, so some valid non-ASCII input is refused (500) ` +
        "or cut mid-character; move the data to a database created WITH ENCODING 'UTF8' (pg_dump, then restore)",
    );
  }
}
