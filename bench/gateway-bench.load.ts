/**
 * Load runs with autocannon (programmatic API): one target, one run, and what
 * it measured — successes (expected status and body), everything else, the
 * latency of each success, and the CPU the gateway and the emulator spent.
 */
import autocannon from 'autocannon';
import { cpuDelta, cpuMsOf, machineBusyMs, treeCpuMs } from './gateway-bench.procs.js';

export type TargetKey = 'floor' | 'reference' | 'allowed' | 'blocked' | 'replay';

export interface Target {
  key: TargetKey;
  label: string;
  /** base URL of the server under load */
  url: string;
  path: string;
  headers: Record<string, string>;
  expectedStatus: number;
  /** a body per request (unique ids), or one fixed body */
  body: (() => string) | string;
  /** the response body of an expected-status answer is the right one */
  bodyOk: (body: string) => boolean;
  /** the process whose CPU is reported in the "gateway" column when it is not the gateway (the reference server) */
  serverPid?: number;
}

export interface LoadShape {
  connections: number;
  /** seconds; or `amount` requests in all */
  duration?: number;
  amount?: number;
  overallRate?: number;
}

export interface Sample {
  /** responses received */
  completed: number;
  /** expected status and body */
  ok: number;
  /** other statuses (and "bad body" for an expected status with the wrong body) */
  unexpected: Record<string, number>;
  /** connection errors, timeouts included */
  errors: number;
  timeouts: number;
  seconds: number;
  /**
   * From the start to the last response. `seconds` runs on to autocannon's end, up to ~2 s
   * later on a paced run: a connection that used its second's quota stops only at its next
   * 1 s rate tick, and the result waits for the next 1 s sample tick.
   */
  activeSeconds: number;
  /** latency of each ok response, ms */
  latencies: number[];
  gatewayCpuMs: number;
  emulatorCpuMs: number;
  /** PostgreSQL processes (see BenchDatabase.serverPids) */
  postgresCpuMs: number;
  /** this process: autocannon and the bookkeeping */
  benchCpuMs: number;
  /** busy CPU of the whole machine (all cores) */
  machineCpuMs: number;
}

export interface Pids {
  gateway: number;
  emulator: number;
  postgres: () => Promise<number[]>;
}

export class ProcessGoneError extends Error {}

function cpuOf(name: string, pid: number): number {
  try {
    return treeCpuMs(pid);
  } catch {
    throw new ProcessGoneError(`the ${name} (pid ${pid}) is gone`);
  }
}

const ownCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

let current: autocannon.Instance | undefined;
let stopped = false;

/** Stops the run in progress and refuses new ones (Ctrl-C). */
export function stopCurrentLoad(): void {
  stopped = true;
  current?.stop();
}

export async function runLoad(target: Target, shape: LoadShape, pids: Pids): Promise<Sample> {
  if (stopped) throw new Error('load stopped');
  const unexpected: Record<string, number> = {};
  const latencies: number[] = [];
  let ok = 0;
  let completed = 0;
  // autocannon calls onResponse and then emits 'response' for the same answer, synchronously on
  // the same client (httpClient's message-complete handler): nothing runs in between, so one flag
  // carries "this answer was ok" to the listener that has its latency, whatever the connections.
  let lastOk = false;
  const onResponse = (status: number, body: string): void => {
    lastOk = false;
    if (status !== target.expectedStatus) unexpected[String(status)] = (unexpected[String(status)] ?? 0) + 1;
    else if (!target.bodyOk(body)) unexpected[`${status} bad body`] = (unexpected[`${status} bad body`] ?? 0) + 1;
    else {
      ok++;
      lastOk = true;
    }
  };
  const base: autocannon.Request = { method: 'POST', path: target.path, headers: target.headers, onResponse };
  const make = target.body;
  const request: autocannon.Request =
    typeof make === 'string' ? { ...base, body: make } : { ...base, setupRequest: (req) => ({ ...req, body: make() }) };

  const pgPids = await pids.postgres();
  const serverPid = target.serverPid ?? pids.gateway;
  const serverName = target.serverPid === undefined ? 'gateway' : `server of ${target.key}`;
  const before = { gw: cpuOf(serverName, serverPid), emu: cpuOf('emulator', pids.emulator), pg: cpuMsOf(pgPids), own: ownCpuMs(), machine: machineBusyMs() };
  const t0 = performance.now();
  let lastResponseAt = t0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        connections: shape.connections,
        ...(shape.amount !== undefined ? { amount: shape.amount } : { duration: shape.duration ?? 10 }),
        ...(shape.overallRate !== undefined ? { overallRate: shape.overallRate } : {}),
        timeout: 10,
        requests: [request],
      },
      (err, res) => {
        current = undefined;
        if (err) reject(err);
        else resolve(res);
      },
    );
    current = instance;
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
      completed++;
      lastResponseAt = performance.now();
      // a wrong answer with the expected status (the gateway answers a failed call 200) is no success
      if (lastOk) latencies.push(ms);
      lastOk = false;
    });
  });
  // Ctrl-C: what ran is a part of the load, not a sample to report (main() must not write it)
  if (stopped) throw new Error('load stopped');
  const seconds = (performance.now() - t0) / 1000;
  const pgPidsAfter = [...new Set([...pgPids, ...(await pids.postgres())])];
  const after = { gw: cpuOf(serverName, serverPid), emu: cpuOf('emulator', pids.emulator), pg: cpuMsOf(pgPidsAfter), own: ownCpuMs(), machine: machineBusyMs() };
  return {
    completed,
    ok,
    unexpected,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds,
    activeSeconds: (lastResponseAt - t0) / 1000,
    latencies,
    gatewayCpuMs: after.gw - before.gw,
    emulatorCpuMs: after.emu - before.emu,
    postgresCpuMs: cpuDelta(before.pg, after.pg),
    benchCpuMs: after.own - before.own,
    machineCpuMs: after.machine - before.machine,
  };
}

export function mergeSamples(samples: Sample[]): Sample {
  const out: Sample = {
    completed: 0, ok: 0, unexpected: {}, errors: 0, timeouts: 0, seconds: 0, activeSeconds: 0, latencies: [],
    gatewayCpuMs: 0, emulatorCpuMs: 0, postgresCpuMs: 0, benchCpuMs: 0, machineCpuMs: 0,
  };
  for (const s of samples) {
    out.completed += s.completed;
    out.ok += s.ok;
    out.errors += s.errors;
    out.timeouts += s.timeouts;
    out.seconds += s.seconds;
    out.activeSeconds += s.activeSeconds;
    out.gatewayCpuMs += s.gatewayCpuMs;
    out.emulatorCpuMs += s.emulatorCpuMs;
    out.postgresCpuMs += s.postgresCpuMs;
    out.benchCpuMs += s.benchCpuMs;
    out.machineCpuMs += s.machineCpuMs;
    for (const v of s.latencies) out.latencies.push(v);
    for (const [k, v] of Object.entries(s.unexpected)) out.unexpected[k] = (out.unexpected[k] ?? 0) + v;
  }
  return out;
}

/** Nearest-rank percentile of unsorted values (0 when empty). */
export function percentile(values: number[], p: number, sorted = false): number {
  if (values.length === 0) return 0;
  const v = sorted ? values : [...values].sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
}

export function unexpectedCount(s: Sample): number {
  return Object.values(s.unexpected).reduce((a, b) => a + b, 0);
}
