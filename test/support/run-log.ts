/**
 * The run log: one file per test run (its path in TEST_RUN_LOG, set by
 * global-setup.ts before any worker forks) that receives every log line of
 * every in-process gateway and everything the child processes the tests start
 * write. global-setup.ts scans it for the test secrets once all files ran.
 *
 * Each line is `<where>\t<line>`: the test file and the source (in-process
 * app, or a child's label, pid and stream), so a finding can say where it was.
 * Importing this module (test-app.ts does) starts copying this worker's
 * in-process log lines; children are copied with teeChildToRunLog().
 */
import type { ChildProcess } from 'node:child_process';
import { openSync, writeSync } from 'node:fs';
import { relative } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { captureLogs } from '../../src/logging/logging.js';
import { RUN_LOG_ENV } from './run-log-env.js';

export { RUN_LOG_ENV };

let fd: number | undefined;

/** The test file this worker runs (vitest forks a worker per file). */
function testFile(): string {
  const state = (globalThis as { __vitest_worker__?: { filepath?: string } }).__vitest_worker__;
  return state?.filepath ? relative(process.cwd(), state.filepath) : `worker ${process.pid}`;
}

/** Appends `text` (split into lines, each prefixed with where it came from) to the run log; a no-op outside a run. */
export function appendToRunLog(source: string, text: string): void {
  const path = process.env[RUN_LOG_ENV];
  if (!path || text.length === 0) return;
  fd ??= openSync(path, 'a');
  const where = `${testFile()} | ${source}`;
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
  // Synchronous, one write per call: nothing is lost when the worker exits, and lines never interleave mid-line.
  writeSync(fd, lines.map((l) => `${where}\t${l}\n`).join(''));
}

/**
 * Copies a child's stdout and stderr to the run log, whole lines at a time
 * (a secret split across two chunks is still found). Call it right after
 * spawn(), before anything reads the streams.
 */
export function teeChildToRunLog(child: ChildProcess, label: string): void {
  for (const [name, stream] of [['stdout', child.stdout], ['stderr', child.stderr]] as const) {
    if (!stream) continue;
    const source = `child ${label} pid ${String(child.pid)} ${name}`;
    const decoder = new StringDecoder('utf8');
    let partial = '';
    stream.on('data', (chunk: Buffer | string) => {
      partial += typeof chunk === 'string' ? chunk : decoder.write(chunk);
      const cut = partial.lastIndexOf('\n');
      if (cut < 0) return;
      appendToRunLog(source, partial.slice(0, cut + 1));
      partial = partial.slice(cut + 1);
    });
    stream.on('close', () => {
      partial += decoder.end();
      if (partial) appendToRunLog(source, partial);
      partial = '';
    });
  }
}

/**
 * Every line the in-process log sink writes (src/logging/logging.ts: all
 * gateways of this worker share it), for the whole life of the worker. It
 * uses the sink's test hook, captureLogs(), but writes each line through to
 * the file instead of keeping it in memory.
 */
function teeLogSinkToRunLog(): void {
  if (!process.env[RUN_LOG_ENV]) return;
  const capture = captureLogs();
  capture.lines.push = (...lines: string[]): number => {
    for (const l of lines) appendToRunLog('in-process log', l);
    return 0;
  };
}

teeLogSinkToRunLog(); // once per module graph, i.e. once per test file
