import { describe, expect, it } from 'vitest';
import type { Sample } from '../../bench/gateway-bench.load.js';
import { checkTargets, summarize, TARGETS } from '../../bench/gateway-bench.report.js';

/** A 10 s round: `ok` successes at 2 ms each, `failed` answers of another status. */
function sample(ok: number, failed: number): Sample {
  return {
    completed: ok + failed, ok, unexpected: failed ? { '500': failed } : {}, errors: 0, timeouts: 0, seconds: 10, activeSeconds: 10,
    latencies: Array.from({ length: ok }, () => 2), gatewayCpuMs: 1, emulatorCpuMs: 1, postgresCpuMs: 1, benchCpuMs: 1, machineCpuMs: 5,
  };
}

describe('checkTargets: allowed p50 at 1 connection', () => {
  const check = (ok1: number, failed1: number) => {
    const summaries = [summarize('allowed', 'allowed', 16, [sample(10_000, 0)]), summarize('allowed', 'allowed', 1, [sample(ok1, failed1)])];
    return checkTargets(summaries, 16).find((c) => c.name.startsWith(`allowed p50 <= ${TARGETS.allowedMaxP50Ms1Conn} ms at 1 connection`))!;
  };

  it('is met by fast successes and no errors', () => {
    expect(check(3000, 0)).toMatchObject({ met: true, detail: 'p50 2 ms, 0 errors' });
  });

  it('is not met when calls failed, however fast the successes were', () => {
    expect(check(10, 4000)).toMatchObject({ met: false, detail: 'p50 2 ms, 4000 errors' });
    expect(check(3000, 1).met).toBe(false);
  });
});
