/**
 * The run log: one file per test run (its path in TEST_RUN_LOG, set by
 * global-setup.ts before any worker forks) that receives every log line of
 * every in-process gateway, everything a test worker prints, and everything
 * the child processes the tests start write. global-setup.ts scans it for the
 * test secrets once all files ran.
 *
 * Each line is `<where>\t<line>`: the test file and the source (in-process
 * app, the worker's stdout/stderr or console, or a child's label, pid and
 * stream), so a finding can say where it was. Importing this module starts
 * copying this worker's in-process log lines; run-log-setup.ts (a vitest
 * setupFiles entry, so every test file) imports it and copies the worker's
 * own output with teeWorkerOutputToRunLog(); children are copied with
 * teeChildToRunLog().
 */
import type { ChildProcess } from 'node:child_process';
import { openSync, writeSync } from 'node:fs';
import { relative } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { captureLogs, logSink } from '../../src/logging/logging.js';
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
 * Collects text written in pieces into whole lines for the run log (a secret
 * split across two writes is still found on one line). A piece without a line
 * break is held until one comes, until flush(), or until it grows past
 * MAX_PARTIAL (a runaway line without a break is cut, not held for ever).
 */
export const MAX_PARTIAL = 1 << 20;
/** More than the longest needle (a secret's start \\u-escaped inside a JSON string, as hex): what a cut text is searched across. */
export const CUT_OVERLAP = 1024;
export function lineCollector(source: string): { push: (chunk: Buffer | string) => void; flush: () => void } {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  return {
    push(chunk) {
      partial += typeof chunk === 'string' ? chunk : decoder.write(chunk);
      const cut = partial.lastIndexOf('\n');
      if (cut < 0 && partial.length > MAX_PARTIAL) {
        // A runaway line is cut, and its last CUT_OVERLAP characters begin the next piece too: a secret across the cut
        // is then whole on one of the two (each searched on its own).
        appendToRunLog(source, `${partial}\n`);
        partial = partial.slice(-CUT_OVERLAP);
        return;
      }
      if (cut < 0) return;
      const whole = partial.slice(0, cut + 1);
      partial = partial.slice(cut + 1);
      appendToRunLog(source, whole);
    },
    flush() {
      partial += decoder.end();
      if (partial) appendToRunLog(source, partial);
      partial = '';
    },
  };
}

/**
 * Copies a child's stdout and stderr to the run log, whole lines at a time.
 * Call it right after spawn(), before anything reads the streams.
 * `privateStdout`: the child's stdout is its answer to its parent, never a log, and is not copied. scripts/pg-server.mjs
 * answers with its URL, superuser password included; its stderr is what reaches the gateway's own (startEmbeddedPostgres).
 */
export function teeChildToRunLog(child: ChildProcess, label: string, { privateStdout = false } = {}): void {
  for (const [name, stream] of [['stdout', child.stdout], ['stderr', child.stderr]] as const) {
    if (!stream || (name === 'stdout' && privateStdout)) continue;
    const lines = lineCollector(`child ${label} pid ${String(child.pid)} ${name}`);
    stream.on('data', (chunk: Buffer | string) => lines.push(chunk));
    stream.on('close', () => lines.flush());
  }
}

/**
 * State shared by every module graph of this worker process (vitest re-evaluates
 * this module for each test file, but process.stdout is one object): the
 * streams already teed, their collectors, and whether the log sink is echoing
 * a line it copies itself (so that line is not copied twice).
 */
interface WorkerTee {
  teed: WeakSet<object>;
  collectors: { flush: () => void }[];
  flushesAtExit: boolean;
  sinkEchoing: number;
}
const SHARED = Symbol.for('tool-gateway.test.run-log.worker-tee');
const shared = ((globalThis as Record<symbol, WorkerTee | undefined>)[SHARED] ??= { teed: new WeakSet(), collectors: [], flushesAtExit: false, sinkEchoing: 0 });

type WriteFn = (chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;

/** Terminal colour codes (Nest's Logger, vitest's console.error of an object): a colour change inside a secret would cut it in two. */
// eslint-disable-next-line no-control-regex -- ESC is the code's first character
const SGR = /\x1b\[[0-9;]*m/g;

/** Wraps `stream.write` so that what is written also goes to the run log (once per stream per process). */
function teeWritable(stream: { write: WriteFn }, source: string): void {
  if (shared.teed.has(stream)) return;
  shared.teed.add(stream);
  const collector = lineCollector(source);
  shared.collectors.push(collector);
  const lines = { push: (text: string): void => collector.push(text.replace(SGR, '')) };
  const decoder = new StringDecoder('utf8');
  const write = stream.write;
  stream.write = function (this: unknown, chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    if (shared.sinkEchoing === 0) {
      if (typeof chunk === 'string') {
        const enc = typeof encoding === 'string' ? encoding.toLowerCase() : 'utf8';
        lines.push(enc === 'utf8' || enc === 'utf-8' ? chunk : Buffer.from(chunk, enc as BufferEncoding).toString('utf8'));
      } else if (chunk instanceof Uint8Array) lines.push(decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)));
    }
    return write.call(this, chunk, encoding, callback);
  };
}

/**
 * Copies everything this worker prints to the run log: process.stdout and
 * process.stderr (Nest's console Logger of a service built outside an app,
 * Node's warnings, anything written directly) and vitest's console (console.log
 * in a test or a service: vitest sends it to its main process, not through
 * process.stdout). Lines the in-process log sink echoes to stdout are already
 * copied by teeLogSinkToRunLog and are not copied again.
 */
export function teeWorkerOutputToRunLog(): void {
  if (!process.env[RUN_LOG_ENV]) return;
  teeWritable(process.stdout as unknown as { write: WriteFn }, 'worker stdout');
  teeWritable(process.stderr as unknown as { write: WriteFn }, 'worker stderr');
  // Node's Console keeps its streams as _stdout/_stderr; vitest's console writes to streams of its own.
  const c = console as unknown as { _stdout?: { write: WriteFn }; _stderr?: { write: WriteFn } };
  if (c._stdout && c._stdout !== (process.stdout as unknown)) teeWritable(c._stdout, 'console stdout');
  if (c._stderr && c._stderr !== (process.stderr as unknown)) teeWritable(c._stderr, 'console stderr');
  if (!shared.flushesAtExit) {
    shared.flushesAtExit = true;
    process.on('exit', flushWorkerOutputToRunLog);
  }
}

/** Writes out what the worker printed without a final line break (at the end of each test file, and at exit). */
export function flushWorkerOutputToRunLog(): void {
  for (const c of shared.collectors) c.flush();
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
  // The sink echoes to stdout (unless a test app turned the echo off): that copy is this one, not a second line.
  const write = logSink.write.bind(logSink);
  logSink.write = (msg: string): void => {
    shared.sinkEchoing++;
    try {
      write(msg);
    } finally {
      shared.sinkEchoing--;
    }
  };
}

teeLogSinkToRunLog(); // once per module graph, i.e. once per test file
