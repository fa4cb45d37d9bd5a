import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { closeAfterOutsideAnswer } from './closing-connection.js';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';

/**
 * During a drain, how long a connection not running an admitted request may stay: one whose body is still
 * coming in, one opened during the drain (its request is answered 503 and closes it), one whose answer ended.
 */
export const DRAIN_CLIENT_DEADLINE_MS = 3_000;
/** The backstop closes every connection this long after VENDOR_TIMEOUT_MS: recording an outcome and answering it. */
export const DRAIN_BACKSTOP_MARGIN_MS = 5_000;
/**
 * How long before the backstop `beforeBackstop` fires: an answer that can end itself cleanly (an HTTP/1.0 export,
 * which ends with a line saying it is incomplete) stops then, and its last bytes have this long to leave before the
 * backstop destroys its connection. At begin() when the backstop comes sooner than that.
 */
export const DRAIN_WIND_UP_MS = 1_000;

/**
 * Each connection's drain signal (HttpDrain.windUp), found from a request (beforeBackstop): the routes reach the drain
 * through their request, as the drain is made for the HTTP server after the application's providers.
 */
const windUpSignals = new WeakMap<Socket, AbortSignal>();

/**
 * Fires DRAIN_WIND_UP_MS before the drain's backstop closes every connection left (undefined for a request the drain
 * does not watch). An answer whose abort would read as a complete body (HTTP/1.0: only the connection's close ends it)
 * stops here at a boundary of its own and ends normally, saying it is incomplete, instead of being cut by the backstop.
 */
export function beforeBackstop(req: IncomingMessage): AbortSignal | undefined {
  return windUpSignals.get(req.socket);
}

/** Longest pause between two looks at the connections for answers their clients stopped reading. */
const STALL_CHECK_MS = 5_000;

/** The requests of one connection dispatched to the app and not yet answered (several when pipelined). */
interface Connection {
  open: Set<ServerResponse>;
  deadline?: NodeJS.Timeout;
  /** Answer bytes waiting in the process for a client that reads none: how many had left it, and since when none more. */
  stalled?: { bytesWritten: number; since: number };
}

function refuse(req: Request & { correlationId?: string }, res: Response): void {
  // Connection: close makes Node end the connection after this answer: the client reconnects elsewhere.
  res.setHeader('Connection', 'close');
  const stop = new AppError('GATEWAY_STOPPING', 'the gateway is stopping and starts no new request; send it again (another replica answers it)', {
    retryAfterSeconds: 1,
  });
  sendProblem(res, stop, req.correlationId ?? 'unknown');
}

/**
 * The HTTP side of a stop (README "Stopping"). Node's server.close() waits for every connection that is not idle,
 * and stops enforcing headersTimeout/requestTimeout once closing: a client that has half sent its headers, or
 * trickles a body, holds the stop for ever, and a body completed late would start its vendor call late in the
 * grace period. So a request counts as started only once its handler runs (`admit`, after the body is read), and
 * from `begin()` on:
 * - the server stops listening: a new connection is refused;
 * - every request not yet admitted is answered 503 GATEWAY_STOPPING (`refuseEarly` before the body, `admit` after);
 * - a connection with no request dispatched (idle, or headers still coming) is destroyed at once;
 * - a connection not running an admitted request is destroyed after DRAIN_CLIENT_DEADLINE_MS (a body still
 *   trickling, a connection opened during the drain, one whose answer ended but stays open);
 * - admitted requests finish; a connection's last answer not yet sent closes it after it (pipelined answers before
 *   it are all sent first);
 * - a backstop closes every connection VENDOR_TIMEOUT_MS + DRAIN_BACKSTOP_MARGIN_MS after the start (a client
 *   that does not read its answer), so the process always ends by itself. Outcomes do not depend on the socket:
 *   the ledger waits for calls at their vendors whatever happened to their clients;
 * - DRAIN_WIND_UP_MS before the backstop, `beforeBackstop` fires: an answer still streaming that the backstop's cut
 *   would make look complete (an HTTP/1.0 export) ends itself first, saying it is incomplete.
 */
export class HttpDrain {
  private stopping = false;
  private readonly connections = new Map<Socket, Connection>();
  private readonly admitted = new WeakSet<ServerResponse>();
  /** Connections destroyed for pipelining more than `pipelineDepth`: their requests still being parsed start nothing. */
  private readonly flooded = new WeakSet<Socket>();
  private backstop?: NodeJS.Timeout;
  /** Aborted DRAIN_WIND_UP_MS before the backstop (beforeBackstop). */
  private readonly windUp = new AbortController();
  private windUpTimer?: NodeJS.Timeout;
  private readonly stallCheck: NodeJS.Timeout;

  /**
   * `pipelineDepth` (HTTP_PIPELINE_DEPTH): the most requests one connection may have dispatched and not yet answered.
   * Node starts every request of a chunk it has read before it stops reading from a client that does not read its
   * answers, so one 64 KiB chunk of small pipelined GETs would otherwise start about 1,400 requests and hold every
   * answer in memory (about 170 MB for the OpenAPI document). Past it, the connection is destroyed, and its requests
   * not yet started are dropped.
   */
  /**
   * `stalledWriteMs` (HTTP_REQUEST_TIMEOUT_MS): a connection with answer bytes waiting to be sent that sends none of
   * them for this long is closed. A client that reads nothing (a large result asked for on connection after
   * connection, an export never read) would otherwise keep each answer in the process's memory for as long as it
   * stays connected. A client reading slowly makes progress and is left alone, as is a request still running (it
   * has nothing waiting to be sent).
   */
  constructor(
    private readonly server: Server,
    private readonly vendorTimeoutMs: number,
    private readonly pipelineDepth: number,
    private readonly stalledWriteMs = 30_000,
  ) {
    this.stallCheck = setInterval(() => this.closeStalled(), Math.min(STALL_CHECK_MS, Math.max(100, Math.floor(stalledWriteMs / 2))));
    this.stallCheck.unref();
    // Every export still streaming over HTTP/1.0 listens to it at once: no leak warning past ten.
    setMaxListeners(0, this.windUp.signal);
    server.once('close', () => clearInterval(this.stallCheck));
    server.on('connection', (socket: Socket) => this.track(socket));
    // Node's own sweep (server.close() runs it: begin() below, and Nest's close later) destroys a connection once its
    // request was read and its answer ended, even with that answer's bytes still queued for a client reading slowly,
    // and with answers pipelined behind it: cut, or never sent (a write that ran, unanswered). The drain's instead.
    server.closeIdleConnections = () => {
      for (const [socket, conn] of this.connections) this.closeIfIdle(socket, conn);
    };
    // Prepended: counted before the app's own listener runs (and perhaps admits it in the same tick). Not
    // 'checkExpectation': a listener there takes those requests over; they are answered 417 at once anyway.
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => this.dispatched(req.socket, res));
    server.once('close', () => {
      clearTimeout(this.backstop);
      clearTimeout(this.windUpTimer);
    });
  }

  /**
   * First in the chain after the correlation id: once stopping, nothing new is read or started. (A request past
   * HTTP_PIPELINE_DEPTH never gets here: dropBehindClose, mounted first, drops it.)
   */
  readonly refuseEarly = (req: Request, res: Response, next: NextFunction): void => {
    if (this.stopping) return refuse(req, res);
    next();
  };

  /** Last before the routes, after the body is read: the request starts here, or (stopping) is refused. */
  readonly admit = (req: Request, res: Response, next: NextFunction): void => {
    if (this.stopping) return refuse(req, res);
    this.admitted.add(res);
    next();
  };

  begin(): void {
    if (this.stopping) return;
    this.stopping = true;
    // Stops listening at once: a new connection is refused (a proxy can retry it elsewhere: nothing was sent), not
    // accepted and answered 503 until Nest's own close of the server, after every pre-shutdown hook (a token renewal
    // at its vendor can hold one for VENDOR_TIMEOUT_MS). Nest's close later still waits for the connections below.
    if (this.server.listening) this.server.close();
    for (const [socket, conn] of this.connections) {
      if (conn.open.size === 0) this.closeIfIdle(socket, conn); // idle, or a request whose headers are still coming
      else {
        // Only the answer sent last (Node answers a connection's requests in order) closes it: marking an earlier
        // one ended the connection after it, and the pipelined requests behind it, which ran, were never answered.
        // One whose headers are out already leaves the connection open: the deadline closes it once it is done.
        const last = [...conn.open].at(-1)!;
        if (!last.headersSent) last.setHeader('Connection', 'close');
        this.armDeadline(socket, conn);
      }
    }
    const backstopMs = this.vendorTimeoutMs + DRAIN_BACKSTOP_MARGIN_MS;
    this.windUpTimer = setTimeout(() => this.windUp.abort(), Math.max(0, backstopMs - DRAIN_WIND_UP_MS));
    this.windUpTimer.unref();
    this.backstop = setTimeout(() => {
      this.server.closeAllConnections();
      for (const socket of this.connections.keys()) socket.destroy();
    }, backstopMs);
    this.backstop.unref();
  }

  /**
   * A connection with no answer open: destroyed (idle, or a request whose headers are still coming), or, while the
   * last answer's bytes are still being sent, ended after them. One with answers open is left to its last answer's
   * `Connection: close` and the deadlines.
   */
  private closeIfIdle(socket: Socket, conn: Connection): void {
    if (conn.open.size > 0) return;
    if (socket.writableLength > 0) socket.end();
    else socket.destroy();
  }

  private closeStalled(): void {
    const now = performance.now();
    for (const [socket, conn] of this.connections) {
      // bytesWritten counts the bytes queued too: what has left the process is that less what still waits in it.
      const sent = socket.bytesWritten - socket.writableLength;
      if (socket.writableLength === 0) conn.stalled = undefined;
      else if (conn.stalled?.bytesWritten !== sent) conn.stalled = { bytesWritten: sent, since: now };
      else if (now - conn.stalled.since >= this.stalledWriteMs) socket.destroy();
    }
  }

  private track(socket: Socket): void {
    const conn: Connection = { open: new Set() };
    this.connections.set(socket, conn);
    windUpSignals.set(socket, this.windUp.signal);
    socket.once('close', () => {
      clearTimeout(conn.deadline);
      this.connections.delete(socket);
    });
    if (this.stopping) this.armDeadline(socket, conn);
  }

  /**
   * Past the depth, the connection reads no more and takes no new request: the requests before are run and answered as
   * ever, the last of them closes it (closeAfterOutsideAnswer: this one and any parsed after it are never run), and it
   * is destroyed once they are answered. Destroying it at once lost the answers of requests within the depth that went
   * on to run (their bodies still being read), and a client told only "connection reset" sends such a write again.
   */
  private dispatched(socket: Socket, res: ServerResponse): void {
    const conn = this.connections.get(socket);
    if (!conn) return;
    if (this.flooded.has(socket)) return; // dropped: never answered, the connection closes after the ones before
    if (conn.open.size >= this.pipelineDepth) {
      this.flooded.add(socket);
      socket.pause();
      closeAfterOutsideAnswer(socket); // every request numbered so far is before this one
      const last = [...conn.open].at(-1); // answered last (Node answers in request order): the connection closes after it
      if (last && !last.headersSent) last.setHeader('Connection', 'close');
      return;
    }
    conn.open.add(res);
    res.once('close', () => {
      conn.open.delete(res);
      if (this.flooded.has(socket) && conn.open.size === 0) socket.end(); // the answers before the flood are out: flushed, then closed
      if (this.stopping) this.armDeadline(socket, conn);
    });
  }

  /** Destroys the connection in DRAIN_CLIENT_DEADLINE_MS unless it is running an admitted request then. */
  private armDeadline(socket: Socket, conn: Connection): void {
    if (conn.deadline) return;
    conn.deadline = setTimeout(() => {
      conn.deadline = undefined;
      if ([...conn.open].some((res) => this.admitted.has(res))) return; // its end re-arms the deadline
      socket.destroy();
    }, DRAIN_CLIENT_DEADLINE_MS);
    conn.deadline.unref();
  }
}
