import type { ChildProcess } from 'node:child_process';

/**
 * Every child process the specs of this worker started (gateways, pg-servers: gateway-process.ts), so that none
 * outlives its test file. A test that times out before its `finally` (a hung request) left its gateway running for
 * good, re-parented to PID 1 with its embedded PostgreSQL listening: the only net was the worker's 'exit' event,
 * which vitest's end of a run (SIGTERM to the worker) never fires. Now each file's end (run-log-setup.ts) and the
 * worker's SIGTERM kill what is left.
 */
const children = new Set<ChildProcess>();

export function trackChild(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** SIGKILLs every tracked child still running; returns how many it killed. */
export function killLeftoverChildren(): number {
  let killed = 0;
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      killed++;
    }
  }
  children.clear();
  return killed;
}

process.once('exit', () => void killLeftoverChildren());
process.once('SIGTERM', () => {
  killLeftoverChildren();
  process.exit(143);
});
