import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';

/** Connection → how many of its requests dropBehindClose has numbered (in the order Node parsed them). */
const numbered = new WeakMap<object, number>();
/** Request → its number on its connection (1, 2, …). */
const numberOf = new WeakMap<object, number>();
/** Connection → the number of the last request allowed to run: the one whose answer closes it, or the last before it. */
const lastToRun = new WeakMap<object, number>();

function closeAt(socket: Socket, last: number): void {
  const before = lastToRun.get(socket);
  if (before === undefined || last < before) lastToRun.set(socket, last);
}

/**
 * Answers `req` with Connection: close, and runs nothing Node parsed after it on that connection (dropBehindClose): a
 * client that pipelined requests behind a refusal (a 413, a bad Host) gets the answers before it, the refusal and then
 * the connection's close, never the answers behind it, so those must not have run either — a write that ran
 * unanswered would be sent again (a second org, an API key nobody saw). Also the requests read while a lingering close
 * drains the connection. The requests before it on the connection run and are answered as usual.
 */
export function closeAfterAnswer(req: Request, res: Response): void {
  res.setHeader('Connection', 'close');
  closeAt(req.socket, numberOf.get(req) ?? numbered.get(req.socket) ?? 0);
}

/**
 * The same for an answer given outside Express (bootstrap.ts: a refused expectation, a 413 before the upload), whose
 * request was never numbered: every request numbered so far was parsed before it, and runs.
 */
export function closeAfterOutsideAnswer(socket: Socket): void {
  closeAt(socket, numbered.get(socket) ?? 0);
}

/**
 * A request parsed after one answered with Connection: close on its connection is neither run nor answered: the
 * connection closes after that answer, and the client learns from the close that its later requests went unanswered
 * (so it may send them again, on a new connection, knowing they did not run). Mounted first, where it numbers each
 * request as Node hands it over (parse order), and again where a request starts (before HttpDrain.admit): a refusal
 * decided while a later request was already on its way is caught there.
 */
export function dropBehindClose(req: Request, _res: Response, next: NextFunction): void {
  let n = numberOf.get(req);
  if (n === undefined) {
    n = (numbered.get(req.socket) ?? 0) + 1;
    numbered.set(req.socket, n);
    numberOf.set(req, n);
  }
  const last = lastToRun.get(req.socket);
  if (last !== undefined && n > last) return;
  next();
}
