import { describe, expect, it } from 'vitest';
import { bootClockReading } from './clock.js';

const failing = (code: string) => () => {
  throw Object.assign(new Error(code), { code });
};

describe('bootClockReading', () => {
  it('reads /proc/uptime\'s first number as ms since boot', () => {
    expect(bootClockReading(() => '12345.67 23456.78\n')).toEqual({ ms: 12_345_670, gone: false });
  });

  it('is gone for good only where it can never be read: no such file, no access, not a number', () => {
    for (const code of ['ENOENT', 'EACCES', 'ENOTDIR']) expect(bootClockReading(failing(code))).toEqual({ ms: null, gone: true });
    expect(bootClockReading(() => 'not a number')).toEqual({ ms: null, gone: true });
  });

  it('a passing error (no file descriptor left) fails this read only', () => {
    for (const code of ['EMFILE', 'ENFILE', 'EIO', 'EINTR']) expect(bootClockReading(failing(code))).toEqual({ ms: null, gone: false });
  });
});
