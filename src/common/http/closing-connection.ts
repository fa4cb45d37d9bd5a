import type { NextFunction, Request, Response } from 'express';

/** Connection → the request whose answer closes it. */
const closingBy = new WeakMap<object, Request>();

/**
 * Answers `req` with Connection: close, and runs nothing Node parses behind it on that connection (dropBehindClose): a
 * client that pipelined requests behind a refusal (a 413, a bad Host) gets the refusal and then the connection's close,
 * never the answers behind it, so those must not have run either — a write that ran unanswered would be sent again
 * (a second org, an API key nobody saw). Also the requests read while a lingering close drains the connection.
 */
export function closeAfterAnswer(req: Request, res: Response): void {
  res.setHeader('Connection', 'close');
  if (!closingBy.has(req.socket)) closingBy.set(req.socket, req);
}

/**
 * A request behind one answered with Connection: close on its connection is neither run nor answered: the connection
 * closes after that answer, and the client learns from the close that its later requests went unanswered (so it may
 * send them again, on a new connection, knowing they did not run). Mounted first, and again where a request starts
 * (before HttpDrain.admit): a refusal decided while a later request was already on its way is caught there.
 */
export function dropBehindClose(req: Request, _res: Response, next: NextFunction): void {
  const closer = closingBy.get(req.socket);
  if (closer !== undefined && closer !== req) return;
  next();
}
