/**
 * What the benchmark measures and in what order: the five targets, then the
 * warm-up and interleaved rounds at each connection count.
 */
import { ORDER_QUERY } from '../src/vendors/shopify/shopify.graphql.js';
import { SHOPIFY_EMULATOR_TOKEN } from '../src/emulator/index.js';
import { runLoad, type Pids, type Sample, type Target, type TargetKey } from './gateway-bench.load.js';
import type { Options } from './gateway-bench.options.js';
import type { ChildService } from './gateway-bench.procs.js';
import { addFloorRatios, checkTargets, summarize, type Summary, type TargetCheck } from './gateway-bench.report.js';
import { ALLOWED, BLOCKED, toolUse, type BenchOrg } from './gateway-bench.setup.js';

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** The four targets; unique ids come from one counter with a per-process prefix. */
export function buildTargets(emulatorUrl: string, gatewayUrl: string, reference: ChildService, org: BenchOrg, replayId: string): Record<TargetKey, Target> {
  const prefix = `toolu_bench_${process.pid.toString(36)}_${Date.now().toString(36)}`;
  let seq = 0;
  const gatewayHeaders = { authorization: `Bearer ${org.agentKey}`, 'content-type': 'application/json', accept: 'application/json' };
  return {
    floor: {
      key: 'floor',
      label: 'floor: emulator direct',
      url: emulatorUrl,
      path: '/admin/api/2026-07/graphql.json',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-shopify-access-token': SHOPIFY_EMULATOR_TOKEN },
      expectedStatus: 200,
      body: JSON.stringify({ query: ORDER_QUERY, variables: { id: `gid://shopify/Order/${ALLOWED.input.orderId}` } }),
      bodyOk: (b) => b.includes('"order":{'),
    },
    reference: {
      key: 'reference',
      label: 'reference: 2 durable commits',
      url: reference.url,
      path: '/',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      expectedStatus: 200,
      body: () => toolUse(ALLOWED, `${prefix}_r${++seq}`),
      bodyOk: (b) => b.includes('"status":"succeeded"'),
      serverPid: reference.pid,
    },
    allowed: {
      key: 'allowed',
      label: 'allowed order_lookup.lookup',
      url: gatewayUrl,
      path: org.toolCallPath,
      headers: gatewayHeaders,
      expectedStatus: 200,
      body: () => toolUse(ALLOWED, `${prefix}_a${++seq}`),
      bodyOk: (b) => b.includes('"status":"succeeded"') && b.includes('"replayed":false'),
    },
    blocked: {
      key: 'blocked',
      label: 'blocked by policy (403)',
      url: gatewayUrl,
      path: org.toolCallPath,
      headers: gatewayHeaders,
      expectedStatus: 403,
      body: () => toolUse(BLOCKED, `${prefix}_b${++seq}`),
      bodyOk: (b) => b.includes('"POLICY_BLOCKED"'),
    },
    replay: {
      key: 'replay',
      label: 'idempotent replay',
      url: gatewayUrl,
      path: org.toolCallPath,
      headers: gatewayHeaders,
      expectedStatus: 200,
      body: toolUse(ALLOWED, replayId),
      bodyOk: (b) => b.includes('"replayed":true') && b.includes('"status":"succeeded"'),
    },
  };
}

function fmtSample(s: Sample): string {
  const sorted = [...s.latencies].sort((a, b) => a - b);
  const p = (q: number): string => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)].toFixed(2) : '-');
  const bad = Object.entries(s.unexpected).map(([k, v]) => `${k}×${v}`);
  if (s.errors) bad.push(`conn-errors×${s.errors}`);
  const pct = (ms: number): string => `${Math.round((ms / (s.seconds * 1000)) * 100)}%`;
  const other = s.machineCpuMs - s.gatewayCpuMs - s.emulatorCpuMs - s.postgresCpuMs - s.benchCpuMs;
  const cpu = `CPU gw ${pct(s.gatewayCpuMs)} pg ${pct(s.postgresCpuMs)} emu ${pct(s.emulatorCpuMs)} bench ${pct(s.benchCpuMs)} other ${pct(Math.max(0, other))}`;
  return `${Math.round(s.ok / s.seconds)} req/s, p50 ${p(0.5)} ms, p99 ${p(0.99)} ms; ${cpu}${bad.length ? `; UNEXPECTED ${bad.join(' ')}` : ''}`;
}

export async function benchmark(targets: Record<TargetKey, Target>, pids: Pids, gateway: ChildService, o: Options): Promise<{ summaries: Summary[]; checks: TargetCheck[] }> {
  const order: TargetKey[] = ['floor', 'reference', 'allowed', 'blocked', 'replay'];
  const levels = o.connections === 1 ? [1] : [o.connections, 1];
  const summaries: Summary[] = [];
  const ensureGateway = (): void => {
    if (!gateway.alive()) throw new Error(`the gateway exited during the benchmark (${gateway.exitInfo() ?? '?'})`);
  };
  for (const connections of levels) {
    if (o.warmup > 0) {
      log(`\n${connections} connection(s): warm-up ${o.warmup} s per target`);
      for (const key of order) {
        const s = await runLoad(targets[key], { connections, duration: o.warmup }, pids);
        log(`  warm-up ${key.padEnd(7)} ${fmtSample(s)}`);
        ensureGateway();
      }
    }
    const samples: Record<TargetKey, Sample[]> = { floor: [], reference: [], allowed: [], blocked: [], replay: [] };
    for (let round = 0; round < o.rounds; round++) {
      log(`${connections} connection(s): round ${round + 1}/${o.rounds}, ${o.duration} s per target`);
      // Interleaved, and each round starts at a different target so none always runs first.
      for (let i = 0; i < order.length; i++) {
        const key = order[(i + round) % order.length];
        const s = await runLoad(targets[key], { connections, duration: o.duration }, pids);
        samples[key].push(s);
        log(`  ${key.padEnd(7)} ${fmtSample(s)}`);
        ensureGateway();
      }
    }
    for (const key of order) summaries.push(summarize(key, targets[key].label, connections, samples[key]));
  }
  addFloorRatios(summaries);
  return { summaries, checks: checkTargets(summaries, o.connections) };
}
