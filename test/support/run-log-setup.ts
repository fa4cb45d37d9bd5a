/**
 * A vitest setupFiles entry (vitest.config.ts): loaded in every test file's
 * worker before the file, so that everything the file's code logs or prints
 * reaches the run log the run-wide leak scan reads (run-log.ts), not only the
 * lines of gateways built by test-app.ts: a service a spec constructs itself
 * logs through Nest's console Logger to the worker's stdout, and a
 * console.log goes to vitest's console.
 */
import { afterAll } from 'vitest';
import { killLeftoverChildren } from './child-processes.js';
import { flushWorkerOutputToRunLog, teeWorkerOutputToRunLog } from './run-log.js';

teeWorkerOutputToRunLog();
// A line printed without a final break is written out under this file's name, not the next file's.
afterAll(() => flushWorkerOutputToRunLog());
// Registered before the file's own hooks, so it runs after them: a child the file's afterAll did not stop (its test
// timed out before its `finally`) does not outlive the file.
afterAll(() => {
  const killed = killLeftoverChildren();
  if (killed > 0) process.stderr.write(`killed ${String(killed)} child process(es) this test file left running\n`);
});
