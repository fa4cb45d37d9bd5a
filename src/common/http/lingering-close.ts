import type { Socket } from 'node:net';

/** How long a connection closed under a client still sending is read on (and the bytes thrown away) after its answer. */
export const LINGER_MS = 2_000;
/** The most bytes read on meanwhile: a client that goes on sending past this is cut at once. */
export const LINGER_BYTES = 4 * 1024 * 1024;

/** How often the time and the bytes read are looked at meanwhile. */
const LINGER_CHECK_MS = 100;

const lingering = new WeakSet<Socket>();

/**
 * Makes the close Node gives `socket` after an answer with Connection: close a lingering one (RFC 9112 §9.6): the
 * answer is sent and the writing side closed (FIN), then what the client still sends is read and thrown away until it
 * closes its side too, for at most LINGER_MS and LINGER_BYTES, before the socket is destroyed. Node's own close
 * (destroySoon) destroys it as soon as the answer is out: a client still sending a body then gets a reset, and its
 * TCP stack throws away the answer it had not read yet (a 413 never seen, only a broken connection).
 */
export function closeLingering(socket: Socket): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  // Node calls it once the last answer has finished (resOnFinish, the answer's Connection: close).
  socket.destroySoon = function lingeringClose(this: Socket): void {
    if (this.destroyed) return;
    // bytesRead, not 'data': Node's HTTP parser may read the socket's handle itself, no 'data' event emitted.
    const readBefore = this.bytesRead;
    const started = performance.now();
    const destroy = (): void => {
      clearInterval(check);
      this.off('end', ended);
      this.destroy();
    };
    // The client has closed its side: nothing more to read; destroyed once the answer is flushed.
    const ended = (): void => {
      if (this.writableFinished) destroy();
      else this.once('finish', destroy);
    };
    const check = setInterval(() => {
      if (performance.now() - started >= LINGER_MS || this.bytesRead - readBefore > LINGER_BYTES) destroy();
    }, LINGER_CHECK_MS);
    check.unref();
    this.once('end', ended);
    this.once('close', () => {
      clearInterval(check);
      this.off('end', ended);
      this.off('finish', destroy);
    });
    if (this.writable) this.end();
    if (this.readableEnded) ended();
  };
}
