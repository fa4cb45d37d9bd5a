import type { ServerResponse } from 'node:http';

export interface ClientGone {
  /** Aborted once the client is found gone. */
  readonly signal: AbortSignal;
  /** Stops listening: call when the handler is done. */
  release(): void;
}

/**
 * Whether the client went away while a handler works for it (a long-poll): the response closes before it is
 * written (a reset, a destroyed socket), or the client's FIN arrives. The server keeps half-closed connections
 * open (createGateway), so a client closing mid-request is heard as a FIN on the socket. A FIN cannot be told from
 * a half-close (`nc -N`, `shutdown(SHUT_WR)` once the request is sent): either ends the wait whenever it is read,
 * before the handler began (while the guard looked the key up, say: neither event would come again) or after,
 * and the client is answered at once with what there is.
 */
export function clientGone(res: ServerResponse): ClientGone {
  const gone = new AbortController();
  const onClose = (): void => gone.abort();
  const socket = res.req.socket;
  res.once('close', onClose);
  socket.once('end', onClose);
  if (socket.destroyed || res.destroyed || socket.readableEnded) gone.abort();
  return {
    signal: gone.signal,
    release: () => {
      res.off('close', onClose);
      socket.off('end', onClose);
    },
  };
}
