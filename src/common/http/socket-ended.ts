import type { Socket } from 'node:net';
import { sharedAbortController } from '../shared-abort.js';

const ended = new WeakMap<Socket, AbortSignal>();

/**
 * Aborted once the client's FIN arrives on `socket`, or the connection closes (a reset: no FIN comes, and a response
 * queued behind another pipelined on it has no socket of its own to hear 'close'): ONE 'end' and one 'close' listener per connection, whatever the number of
 * requests on it waiting at once. HTTP_PIPELINE_DEPTH lets one keep-alive connection have up to 64 requests
 * dispatched together; a listener each put 11 or more on one socket when as many long-polls were pipelined, and Node
 * printed "MaxListenersExceededWarning: Possible EventEmitter memory leak" — a false alarm (each was removed when its
 * request ended). The signal takes any number of listeners (sharedAbortController).
 */
export function socketEnded(socket: Socket): AbortSignal {
  let signal = ended.get(socket);
  if (!signal) {
    const controller = sharedAbortController();
    if (socket.readableEnded || socket.destroyed) controller.abort();
    else {
      socket.once('end', () => controller.abort());
      socket.once('close', () => controller.abort());
    }
    signal = controller.signal;
    ended.set(socket, signal);
  }
  return signal;
}
