/**
 * `--soak`: allowed calls with unique keys at a fixed rate for a long while.
 * Checks: the rate was held (gateway-bench.checks.ts), 0 errors, one ledger row
 * per accepted call, gateway RSS growth < 10%.
 */
import pg from 'pg';
import { rateHeldCheck } from './gateway-bench.checks.js';
import { percentile, runLoad, unexpectedCount, type Pids, type Target } from './gateway-bench.load.js';
import { treeRssKb } from './gateway-bench.procs.js';

export const SOAK_MAX_RSS_GROWTH = 0.1;

export interface SoakOptions {
  seconds: number;
  rate: number;
  connections: number;
  warmupSeconds: number;
  dbUrl: string;
  orgId: string;
  /** the gateway's base URL, for the heap figures of /metrics */
  gatewayUrl: string;
}

export interface SoakResult {
  seconds: number;
  rate: number;
  connections: number;
  sent: number;
  completed: number;
  accepted: number;
  achievedRps: number;
  /** seconds from the start to the last answer (the rate check's time; `seconds` includes autocannon's end) */
  lastAnswerSeconds: number;
  errors: number;
  unexpected: Record<string, number>;
  connectionErrors: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  ledgerRowsAdded: number;
  gatewayCpuMsPerCall: number;
  /** gateway CPU time / wall time, in % of one core */
  gatewayCpuPercent: number;
  /** CPU of the PostgreSQL processes we can see (see BenchDatabase.serverPids) */
  postgresCpuMsPerCall: number;
  rssAfterWarmupKb: number;
  rssEndKb: number;
  rssMaxKb: number;
  rssGrowth: number;
  /** RSS every 5 s during the soak, kB */
  rssSamplesKb: number[];
  /** V8 heap used (nodejs_heap_size_used_bytes of /metrics) after warm-up, every 5 s, and at the end, MiB; for diagnosis */
  heapUsedAfterWarmupMiB: number | null;
  heapUsedEndMiB: number | null;
  heapUsedSamplesMiB: number[];
  checks: { name: string; met: boolean; detail: string }[];
}

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** nodejs_heap_size_used_bytes from the gateway's /metrics, in MiB (null when unavailable). */
async function heapUsedMiB(gatewayUrl: string): Promise<number | null> {
  try {
    const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
    const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([0-9.e+]+)$/m.exec(text);
    return m ? Math.round(Number(m[1]) / 1024 / 102.4) / 10 : null;
  } catch {
    return null;
  }
}

async function ledgerRows(dbUrl: string, orgId: string): Promise<number> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    const res = await c.query<{ n: string }>('SELECT count(*)::bigint AS n FROM tool_calls WHERE org_id = $1', [orgId]);
    return Number(res.rows[0].n);
  } finally {
    await c.end();
  }
}

export async function soak(target: Target, pids: Pids, o: SoakOptions): Promise<SoakResult> {
  log(`soak: warm-up ${o.warmupSeconds} s at ${o.rate} calls/s`);
  await runLoad(target, { connections: o.connections, amount: o.rate * o.warmupSeconds, overallRate: o.rate }, pids);
  const rssAfterWarmupKb = treeRssKb(pids.gateway);
  const heapUsedAfterWarmupMiB = await heapUsedMiB(o.gatewayUrl);
  const rowsBefore = await ledgerRows(o.dbUrl, o.orgId);
  const rssSamplesKb: number[] = [];
  const heapUsedSamplesMiB: number[] = [];
  const timer = setInterval(() => {
    try {
      rssSamplesKb.push(treeRssKb(pids.gateway));
    } catch {
      // the gateway is gone; the run reports it
    }
    void heapUsedMiB(o.gatewayUrl).then((h) => {
      if (h !== null) heapUsedSamplesMiB.push(h);
    });
  }, 5_000);
  const amount = o.rate * o.seconds;
  log(`soak: ${o.seconds} s at ${o.rate} calls/s (${amount} allowed calls, ${o.connections} connections); RSS after warm-up ${Math.round(rssAfterWarmupKb / 1024)} MiB`);
  let sample;
  try {
    sample = await runLoad(target, { connections: o.connections, amount, overallRate: o.rate }, pids);
  } finally {
    clearInterval(timer);
  }
  const rssEndKb = treeRssKb(pids.gateway);
  const heapUsedEndMiB = await heapUsedMiB(o.gatewayUrl);
  const rowsAdded = (await ledgerRows(o.dbUrl, o.orgId)) - rowsBefore;
  const sorted = [...sample.latencies].sort((a, b) => a - b);
  const errors = sample.errors + unexpectedCount(sample);
  const rssGrowth = (rssEndKb - rssAfterWarmupKb) / rssAfterWarmupKb;
  const r2 = (n: number): number => Math.round(n * 100) / 100;
  const result: SoakResult = {
    seconds: r2(sample.seconds),
    rate: o.rate,
    connections: o.connections,
    sent: amount,
    completed: sample.completed,
    accepted: sample.ok,
    achievedRps: Math.round(sample.ok / sample.seconds),
    lastAnswerSeconds: r2(sample.activeSeconds),
    errors,
    unexpected: sample.unexpected,
    connectionErrors: sample.errors,
    p50Ms: r2(percentile(sorted, 50, true)),
    p99Ms: r2(percentile(sorted, 99, true)),
    maxMs: r2(sorted.length ? sorted[sorted.length - 1] : 0),
    ledgerRowsAdded: rowsAdded,
    gatewayCpuMsPerCall: sample.completed ? Math.round((sample.gatewayCpuMs / sample.completed) * 1000) / 1000 : 0,
    gatewayCpuPercent: Math.round((sample.gatewayCpuMs / (sample.seconds * 1000)) * 100),
    postgresCpuMsPerCall: sample.completed ? Math.round((sample.postgresCpuMs / sample.completed) * 1000) / 1000 : 0,
    rssAfterWarmupKb,
    rssEndKb,
    rssMaxKb: Math.max(rssEndKb, ...rssSamplesKb),
    rssGrowth: Math.round(rssGrowth * 1000) / 1000,
    rssSamplesKb,
    heapUsedAfterWarmupMiB,
    heapUsedEndMiB,
    heapUsedSamplesMiB,
    checks: [],
  };
  result.checks = [
    // `amount` calls are sent however long they take: a gateway that falls behind the pace would pass the others.
    rateHeldCheck(sample.ok, sample.activeSeconds, { amount, rate: o.rate, connections: o.connections }),
    { name: 'soak: 0 errors', met: errors === 0 && sample.completed === amount, detail: `${errors} errors, ${sample.completed}/${amount} answered` },
    { name: 'soak: ledger rows = accepted calls', met: rowsAdded === sample.ok, detail: `${rowsAdded} rows, ${sample.ok} accepted` },
    {
      name: `soak: gateway RSS growth < ${SOAK_MAX_RSS_GROWTH * 100}%`,
      met: rssGrowth < SOAK_MAX_RSS_GROWTH,
      detail: `${(rssGrowth * 100).toFixed(1)}% (${Math.round(rssAfterWarmupKb / 1024)} → ${Math.round(rssEndKb / 1024)} MiB, max ${Math.round(result.rssMaxKb / 1024)} MiB)`,
    },
  ];
  return result;
}
