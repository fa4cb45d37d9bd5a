/**
 * `npm run bench`: the gateway against the vendor floor (issue 7).
 *
 * Starts everything it needs: PostgreSQL (a fresh database on DATABASE_URL's
 * server, dropped at the end; else an embedded, durable one in .tmp/bench-pg),
 * the vendor emulator and the gateway as built for production, each as its own
 * process. Sets up an org over HTTP, then puts the same autocannon load on:
 *   floor    the emulator directly: the Shopify order query the gateway sends
 *   reference  a minimal server doing just two durable commits per call
 *            (bench/reference-server.ts): the machine's ceiling for a call that
 *            records intent and outcome, which the issue's targets were set against
 *   allowed  order_lookup.lookup through the gateway, a unique tool_use id per call
 *   blocked  shopify_query.get_product, blocked by a policy rule (403), unique ids
 *   replay   the same tool_use every time (after one warm call)
 * at N connections and at 1 connection: a warm-up, then interleaved rounds.
 * Prints req/s, p50/p99, errors, CPU per call and ratios to the floor, checks
 * the issue's targets, writes bench/results/gateway.json and a README table.
 *
 * `--soak`: allowed calls at a fixed rate (default 300/s for 300 s): 0 errors,
 * ledger rows = accepted calls, gateway RSS growth < 10%
 * (bench/results/gateway-soak.json).
 *
 * Exit code: 0 all targets met, 3 the run finished but a target was missed, 1 failure.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../src/common/project-root.js';
import { ORDER_QUERY } from '../src/vendors/shopify/shopify.graphql.js';
import { SHOPIFY_EMULATOR_TOKEN } from '../src/emulator/index.js';
import { ProcessGoneError, runLoad, stopCurrentLoad, type Pids, type Sample, type Target, type TargetKey } from './gateway-bench.load.js';
import { Cleanup, startDatabase, startEmulator, startGateway, startReference, type ChildService } from './gateway-bench.procs.js';
import { addFloorRatios, calibration, checkTargets, consoleReport, interference, markdownTable, summarize, type Summary, type TargetCheck } from './gateway-bench.report.js';
import { ALLOWED, BENCH_ADMIN_KEY, BENCH_MASTER_KEY, BLOCKED, checkWiring, setupBenchOrg, toolUse, type BenchOrg } from './gateway-bench.setup.js';
import { soak } from './gateway-bench.soak.js';

const HELP = `usage: npm run bench -- [options]
  --duration S        seconds per target per round (default 10)
  --rounds N          interleaved rounds per connection count (default 3)
  --connections N     connections of the main pass (default 16); a 1-connection pass follows
  --warmup S          warm-up seconds per target before the rounds (default 3)
  --pool N            the gateway's DB_POOL_SIZE (default 20)
  --workers N         N gateway processes sharing the port via node:cluster (default 1):
                      what N replicas on this machine do; CPU and RSS are their sums
  --gateway-env K=V   extra gateway environment (repeatable), e.g. VENDOR_CONCURRENCY_LIMIT=32
  --profile DIR       run the gateway with --cpu-prof and write its V8 CPU profile to DIR
  --soak              soak mode instead: allowed calls at a fixed rate
  --soak-seconds S    soak length (default 300)
  --soak-rate N       calls per second (default 300)
  --soak-warmup S     warm-up before the RSS baseline is taken (default 60: V8 sizes its heap for the load in the first minute)
  --soak-connections N  connections of the soak (default 8). autocannon paces a rate per
                      connection per second, so each second starts with a burst of up to N
                      concurrent calls; 8 = the default VENDOR_CONCURRENCY_LIMIT
env: DATABASE_URL  a server to create (and drop) a scratch database on; default: embedded PostgreSQL`;

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

interface Options {
  duration: number;
  rounds: number;
  connections: number;
  warmup: number;
  pool: number;
  workers: number;
  gatewayEnv: Record<string, string>;
  profileDir: string | undefined;
  soak: boolean;
  soakSeconds: number;
  soakRate: number;
  soakConnections: number;
  soakWarmup: number;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '16' },
      warmup: { type: 'string', default: '3' },
      pool: { type: 'string', default: '20' },
      workers: { type: 'string', default: '1' },
      'gateway-env': { type: 'string', multiple: true, default: [] },
      profile: { type: 'string' },
      soak: { type: 'boolean', default: false },
      'soak-seconds': { type: 'string', default: '300' },
      'soak-rate': { type: 'string', default: '300' },
      'soak-connections': { type: 'string', default: '8' },
      'soak-warmup': { type: 'string', default: '60' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    log(HELP);
    process.exit(0);
  }
  const num = (name: string, raw: string, min: number): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min}, got "${raw}"`);
    return n;
  };
  const gatewayEnv: Record<string, string> = {};
  for (const kv of values['gateway-env']) {
    const i = kv.indexOf('=');
    if (i < 1) throw new Error(`--gateway-env wants KEY=VALUE, got "${kv}"`);
    gatewayEnv[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return {
    duration: num('duration', values.duration, 1),
    rounds: Math.floor(num('rounds', values.rounds, 1)),
    connections: Math.floor(num('connections', values.connections, 1)),
    warmup: num('warmup', values.warmup, 0),
    pool: Math.floor(num('pool', values.pool, 1)),
    workers: Math.floor(num('workers', values.workers, 1)),
    gatewayEnv,
    profileDir: values.profile,
    soak: values.soak,
    soakSeconds: Math.floor(num('soak-seconds', values['soak-seconds'], 1)),
    soakRate: Math.floor(num('soak-rate', values['soak-rate'], 1)),
    soakConnections: Math.floor(num('soak-connections', values['soak-connections'], 1)),
    soakWarmup: Math.floor(num('soak-warmup', values['soak-warmup'], 1)),
  };
}

/** The four targets; unique ids come from one counter with a per-process prefix. */
function buildTargets(emulatorUrl: string, gatewayUrl: string, reference: ChildService, org: BenchOrg, replayId: string): Record<TargetKey, Target> {
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

function gatewayEnvFor(dbUrl: string, emulatorUrl: string, o: Options): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: dbUrl,
    DB_POOL_SIZE: String(o.pool),
    DATA_DIR: '.tmp/bench-gateway-data',
    MASTER_ENCRYPTION_KEY: BENCH_MASTER_KEY,
    BOOTSTRAP_ADMIN_KEY: BENCH_ADMIN_KEY,
    RATE_LIMIT_RPS: '0',
    // One org drives all the load here; the per org × vendor in-flight limit (default 8)
    // would refuse by design what 16 connections send, so the bench raises it.
    VENDOR_CONCURRENCY_LIMIT: '64',
    // Vendor base URLs at the emulator (server config, as in production).
    SHOPIFY_BASE_URL: emulatorUrl,
    AMAZON_LWA_URL: `${emulatorUrl}/auth/o2/token`,
    AMAZON_SPAPI_BASE_URL: emulatorUrl,
    JUMIO_AUTH_BASE_URL: emulatorUrl,
    JUMIO_RETRIEVAL_BASE_URL: emulatorUrl,
    NANGO_HOST: emulatorUrl,
    ...o.gatewayEnv,
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

async function benchmark(targets: Record<TargetKey, Target>, pids: Pids, gateway: ChildService, o: Options): Promise<{ summaries: Summary[]; checks: TargetCheck[] }> {
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

function printChecks(checks: { name: string; met: boolean; detail: string }[]): void {
  log('\nTargets:');
  for (const c of checks) log(`  [${c.met ? 'met' : 'NOT MET'}] ${c.name}: ${c.detail}`);
}

async function main(): Promise<number> {
  const o = parseOptions();
  const root = projectRoot();
  const resultsDir = join(root, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const cleanup = new Cleanup();
  let interrupted = false;
  const onSignal = (signal: string): void => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping the load and cleaning up...\n`);
    stopCurrentLoad();
    void cleanup.run().then(() => process.exit(130));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  const startedAt = new Date().toISOString();
  let gateway: ChildService | undefined;
  try {
    log(`gateway benchmark (${o.soak ? `soak ${o.soakSeconds} s at ${o.soakRate}/s over ${o.soakConnections} connections` : `${o.rounds} rounds × ${o.duration} s, ${o.connections} and 1 connection(s)`}${o.workers > 1 ? `, ${o.workers} gateway workers` : ''}), ${cpus().length} CPUs, node ${process.version}`);
    log('starting PostgreSQL, the vendor emulator and the gateway...');
    const db = await startDatabase(root, cleanup);
    log(`  database: ${db.kind}`);
    const emulator = await startEmulator(root, join(resultsDir, 'gateway-bench.emulator.log'), cleanup);
    gateway = await startGateway(
      root,
      gatewayEnvFor(db.url, emulator.url, o),
      join(resultsDir, 'gateway-bench.gateway.log'),
      cleanup,
      o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : [],
      o.workers,
    );
    const pids: Pids = { gateway: gateway.pid, emulator: emulator.pid, postgres: db.serverPids };
    const reference = o.soak ? undefined : await startReference(root, db.url, o.pool, join(resultsDir, 'gateway-bench.reference.log'), cleanup);

    const org = await setupBenchOrg(gateway.url);
    const replayId = `toolu_bench_replay_${process.pid}`;
    await checkWiring(gateway.url, org, replayId);
    log(`  org ${org.orgId}, run ${org.runId}: allowed, blocked and replay calls checked`);
    const targets = buildTargets(emulator.url, gateway.url, reference ?? gateway, org, replayId);
    const settings = { ...o, database: db.kind, cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, startedAt };

    let allMet: boolean;
    if (o.soak) {
      const result = await soak(targets.allowed, pids, {
        seconds: o.soakSeconds,
        rate: o.soakRate,
        connections: o.soakConnections,
        warmupSeconds: o.soakWarmup,
        dbUrl: db.url,
        orgId: org.orgId,
        gatewayUrl: gateway.url,
      });
      if (!gateway.alive()) throw new Error(`the gateway exited during the soak:\n${gateway.tail()}`);
      log(
        `\nsoak: ${result.completed}/${result.sent} answered in ${result.seconds} s (${result.achievedRps}/s), accepted ${result.accepted}, errors ${result.errors}` +
          `${result.errors ? ` ${JSON.stringify(result.unexpected)} conn ${result.connectionErrors}` : ''}, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms`,
      );
      log(
        `  ledger rows added ${result.ledgerRowsAdded}; gateway CPU ${result.gatewayCpuMsPerCall} ms/call (${result.gatewayCpuPercent}% of a core), PostgreSQL CPU ${result.postgresCpuMsPerCall} ms/call`,
      );
      log(`  gateway RSS (MiB, every 5 s): ${result.rssSamplesKb.map((k) => Math.round(k / 1024)).join(' ')}`);
      log(`  gateway V8 heap used (MiB): after warm-up ${String(result.heapUsedAfterWarmupMiB)}, every 5 s ${result.heapUsedSamplesMiB.join(' ')}, end ${String(result.heapUsedEndMiB)}`);
      printChecks(result.checks);
      allMet = result.checks.every((c) => c.met);
      writeFileSync(join(resultsDir, 'gateway-soak.json'), JSON.stringify({ settings, soak: result, allMet }, null, 2) + '\n');
      log(`\nwrote bench/results/gateway-soak.json`);
    } else {
      const { summaries, checks } = await benchmark(targets, pids, gateway, o);
      log(`\nResults (req/s counts only expected answers: 200, or 403 for the blocked call):\n`);
      log(consoleReport(summaries));
      printChecks(checks);
      const calibrated = calibration(summaries, o.connections);
      if (calibrated) log(`\n${calibrated}`);
      const noisy = interference(summaries);
      if (noisy.length) {
        log(`\nWARNING: other processes on this machine used CPU during the rounds (share of all cores): ${noisy.join(', ')}.`);
        log('         The figures above are lower than a quiet machine gives; run again when nothing else is running.');
      }
      const table = markdownTable(summaries);
      log(`\nREADME table:\n\n${table}\n`);
      allMet = checks.every((c) => c.met);
      writeFileSync(join(resultsDir, 'gateway.json'), JSON.stringify({ settings, summaries, targets: checks, calibration: calibrated, allMet, interference: noisy, markdown: table }, null, 2) + '\n');
      log('wrote bench/results/gateway.json');
    }
    const problems = gateway.problemLines();
    if (problems.length) {
      log(`\nthe gateway logged ${problems.length} warn/error line(s); the first ones:`);
      for (const p of problems.slice(0, 5)) log(`  ${p.slice(0, 400)}`);
    }
    return allMet ? 0 : 3;
  } catch (err) {
    if (interrupted) return 130;
    process.stderr.write(`\nbenchmark failed: ${err instanceof ProcessGoneError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    if (gateway) {
      const ended = gateway.exitInfo();
      if (ended) process.stderr.write(`the gateway ended with ${ended}${ended === 'signal SIGTERM' || /SIGTERM received/.test(gateway.tail()) ? ' (a SIGTERM from outside this benchmark: another session killing gateway processes?)' : ''}\n`);
      process.stderr.write(`\nlast gateway output:\n${gateway.tail()}\n`);
    }
    return 1;
  } finally {
    await cleanup.run(); // the same run a signal started, if any
  }
}

process.exit(await main());
