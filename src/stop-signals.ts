/**
 * SIGTERM / SIGINT / SIGHUP at any time, start-up included. In a container Node is PID 1, and PID 1 ignores a signal
 * it has no handler for, so a stop sent during start-up did nothing until the SIGKILL (Kubernetes has no `--init`).
 * The handlers are installed by this module, which main.ts imports before the gateway's own modules: those (Nest,
 * TypeORM, pg) took 3–4 s to load on a loaded machine, and a stop in that time was ignored. Before the gateway is up
 * the stop is remembered: waiting for the database or for another replica's migration lock gives up at once;
 * otherwise it is carried out as soon as start-up returns (migrations are transactions; the start-up sweep's calls
 * finish and are recorded). After, it drains (see README "Stopping"). Node built-ins only (and output-streams.ts,
 * which guards stdout and stderr from here on): nothing here may be slow to load.
 */
import { hangUpTerminals, write } from './logging/output-streams.js';

let requested: string | undefined;
let listener: ((signal: string) => void) | undefined;

const onSignal = (signal: string): void => {
  // The terminal is gone: nothing more is written to it (output-streams.ts), not even this signal's line.
  if (signal === 'SIGHUP') hangUpTerminals();
  if (requested) return;
  requested = signal;
  write('stderr', `${signal} received, shutting down\n`);
  listener?.(signal);
};
// `on`, not `once`: a repeated signal (a second Ctrl-C, a supervisor sending again) must find a handler that
// ignores it, not Node's default action, which would kill the drain with calls still at their vendors.
process.on('SIGTERM', () => onSignal('SIGTERM'));
process.on('SIGINT', () => onSignal('SIGINT'));
// The terminal or SSH session closed: a stop like any other (Node's default would end the process undrained).
process.on('SIGHUP', () => onSignal('SIGHUP'));

/** The stop signal received so far, if any. */
export const stopRequested = (): string | undefined => requested;

/** What to do on the first stop signal from now on (the drain, once the gateway listens). */
export function onStopRequested(fn: (signal: string) => void): void {
  listener = fn;
}
