/**
 * The process's stdout (the JSON log) and stderr (start-up, stop and fatal lines), written so that what becomes of
 * their reader never stops the gateway. Node built-ins only: stop-signals.ts loads this before anything else.
 *
 * - A reader gone (EPIPE), a full disk or a file-size limit (ENOSPC, EFBIG), a hung-up terminal (EIO): Node emits the
 *   write's failure as an 'error' on the stream, and with no handler the process died at once, undrained, with calls
 *   at their vendors left `running` (then swept `indeterminate` though the vendor had answered). Now the stream is
 *   given up: its later lines are dropped and counted, and the other stream says so once.
 * - A reader that stalls (a paused pipe): Node queues every write to it in memory without limit, and any client could
 *   make lines long (a 16 kB request path). Past MAX_QUEUED bytes waiting, lines are dropped and counted until the
 *   queue drains; then stderr says how many were lost.
 * - A terminal closed (SIGHUP, stop-signals.ts): writing to it after the hang-up crashed Node (SIGSEGV) a moment
 *   later, before the drain. The stop handler gives up terminal streams first (hangUpTerminals).
 *
 * The counts are the gateway's log_lines_dropped_total metric.
 */
export type OutputName = 'stdout' | 'stderr';

/** Bytes allowed to wait for a slow reader, per stream, before lines are dropped. */
export const MAX_QUEUED = 4 * 1024 * 1024;

const given = new Map<OutputName, string>(); // the streams given up, and why
const dropped: Record<OutputName, number> = { stdout: 0, stderr: 0 };
const droppedWhileFull: Record<OutputName, number> = { stdout: 0, stderr: 0 };

const streamOf = (name: OutputName): NodeJS.WriteStream => (name === 'stdout' ? process.stdout : process.stderr);

function giveUp(name: OutputName, why: string): void {
  if (given.has(name)) return;
  given.set(name, why);
  if (name === 'stdout') write('stderr', `stdout cannot be written (${why}): log lines are dropped from now on (log_lines_dropped_total)\n`);
  else write('stdout', `${JSON.stringify({ level: 40, time: Date.now(), msg: `stderr cannot be written (${why}): its lines are dropped from now on (log_lines_dropped_total)` })}\n`);
}

for (const name of ['stdout', 'stderr'] as const) {
  streamOf(name).on('error', (err: NodeJS.ErrnoException) => giveUp(name, err.code ?? err.message));
}

/** Writes `text` to the stream unless it was given up or its reader is MAX_QUEUED behind: then the line is counted as dropped. */
export function write(name: OutputName, text: string): void {
  if (given.has(name)) {
    dropped[name]++;
    return;
  }
  const stream = streamOf(name);
  if (stream.writableLength > MAX_QUEUED) {
    dropped[name]++;
    if (droppedWhileFull[name]++ === 0) stream.once('drain', () => reportDrained(name));
    return;
  }
  try {
    stream.write(text);
  } catch (err) {
    // A stream destroyed by an error not yet emitted throws on write.
    dropped[name]++;
    giveUp(name, (err as NodeJS.ErrnoException).code ?? String(err));
  }
}

function reportDrained(name: OutputName): void {
  const n = droppedWhileFull[name];
  droppedWhileFull[name] = 0;
  if (n > 0 && !given.has(name)) {
    const line = `${n} line(s) dropped while ${name}'s reader fell more than ${MAX_QUEUED} bytes behind (log_lines_dropped_total)`;
    write('stderr', `${line}\n`);
  }
}

/** SIGHUP: the terminal is gone; a stream that was one is given up before anything is written to it. */
export function hangUpTerminals(): void {
  const terminals = (['stdout', 'stderr'] as const).filter((name) => streamOf(name).isTTY);
  // All given up before either says so: the other one may be the same terminal.
  for (const name of terminals) given.set(name, 'terminal hung up');
  if (terminals.includes('stdout') && !given.has('stderr')) write('stderr', 'stdout was a terminal that hung up: log lines are dropped from now on (log_lines_dropped_total)\n');
}

/** Lines dropped so far, by stream. */
export function droppedLines(): Readonly<Record<OutputName, number>> {
  return { ...dropped };
}
