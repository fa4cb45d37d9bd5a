import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConsoleLogger, Logger, type LoggerService } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { logSink, setLogEcho } from '../../src/logging/logging.js';
import { RUN_LOG_ENV } from './run-log-env.js';

/**
 * run-log-setup.ts (vitest.config.ts setupFiles) copies everything a test worker prints to the run log, so the
 * run-wide leak scan reads it: this file imports neither it nor run-log.ts, as a spec of a service built outside
 * an app does not.
 */
const THIS_FILE = 'test/support/run-log-setup.spec.ts';

/** The run log's lines holding `marker`, as [where, text]. */
function runLogLines(marker: string): [string, string][] {
  return readFileSync(process.env[RUN_LOG_ENV]!, 'utf8')
    .split('\n')
    .filter((l) => l.includes(marker))
    .map((l) => [l.slice(0, l.indexOf('\t')), l.slice(l.indexOf('\t') + 1)]);
}

describe('the run log receives what a test worker prints', () => {
  it('console.log and console.error (vitest\'s console), tagged with the spec file', () => {
    const marker = `console-${randomUUID()}`;
    /* eslint-disable no-console -- what a test or a service prints with console is what is tested */
    console.log('out %s', marker);
    console.error({ said: marker });
    /* eslint-enable no-console */
    expect(runLogLines(marker)).toEqual([
      [`${THIS_FILE} | console stdout`, `out ${marker}`],
      [`${THIS_FILE} | console stderr`, `{ said: '${marker}' }`],
    ]);
  });

  it('Nest\'s console Logger of a service built outside an app: log to stdout, error to stderr', () => {
    const marker = `nest-${randomUUID()}`;
    // A worker runs file after file (vitest.config.ts: isolate false): the last app an earlier file built made its
    // logger Nest's static one. In a worker of its own, a service built outside an app logs through Nest's
    // ConsoleLogger, which is what is tested here; the earlier logger is put back after.
    const previous = (Logger as unknown as { staticInstanceRef?: LoggerService }).staticInstanceRef;
    Logger.overrideLogger(new ConsoleLogger());
    const logger = new Logger('RunLogProbe');
    try {
      logger.log(`logged ${marker}`);
      logger.error(`failed ${marker}`);
    } finally {
      if (previous) Logger.overrideLogger(previous);
    }
    const lines = runLogLines(marker);
    expect(lines.map(([where]) => where)).toEqual([`${THIS_FILE} | worker stdout`, `${THIS_FILE} | worker stderr`]);
    expect(lines[0]![1]).toMatch(new RegExp(`\\[RunLogProbe\\].*logged ${marker}`));
    expect(lines[1]![1]).toMatch(new RegExp(`\\[RunLogProbe\\].*failed ${marker}`));
  });

  it('a line written in pieces is one line (a secret split across writes is still found), bytes as text', () => {
    const marker = `pieces-${randomUUID()}`;
    process.stdout.write(`first half ${marker.slice(0, 10)}`);
    expect(runLogLines(marker.slice(0, 10))).toEqual([]); // held until its line ends
    process.stdout.write(Buffer.from(`${marker.slice(10)} second half\nnext `));
    process.stdout.write('line\n');
    expect(runLogLines(marker)).toEqual([[`${THIS_FILE} | worker stdout`, `first half ${marker} second half`]]);
  });

  it('a line of the in-process log sink echoed to stdout is copied once, not twice', () => {
    const marker = `sink-${randomUUID()}`;
    setLogEcho(true);
    try {
      logSink.write(`{"msg":"${marker}"}\n`);
    } finally {
      setLogEcho(false);
    }
    expect(runLogLines(marker)).toEqual([[`${THIS_FILE} | in-process log`, `{"msg":"${marker}"}`]]);
  });
});
