/**
 * Bench only (`npm run bench -- --workers N`): N gateway processes sharing one
 * port through node:cluster, to measure what more than one Node thread does for
 * the gateway on this machine. It is the same as N replicas on one database
 * behind a balancer that spreads connections round-robin — which is how to run
 * the gateway on several cores in production (README, Performance): its rate
 * limit, concurrency lease and breaker are per process, so they are not shared
 * by these workers either.
 *
 * Prints one `listening on http://…` line once every worker listens (the bench
 * waits for it); a worker's own line is renamed so it cannot be taken for that.
 * A worker that dies while serving takes the launcher down with it (exit 1).
 */
import cluster from 'node:cluster';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const workers = Number(process.env.BENCH_GATEWAY_WORKERS ?? '2');
if (!Number.isInteger(workers) || workers < 1) {
  process.stderr.write(`fatal: BENCH_GATEWAY_WORKERS must be an integer >= 1, got "${String(process.env.BENCH_GATEWAY_WORKERS)}"\n`);
  process.exit(1);
}

cluster.setupPrimary({ exec: fileURLToPath(new URL('../src/main.js', import.meta.url)), silent: true });

let stopping = false;
let listening = 0;

function stop(code: number): void {
  if (stopping) return;
  stopping = true;
  process.exitCode = code;
  for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
  setTimeout(() => process.exit(code), 15_000).unref();
}

for (let i = 0; i < workers; i++) {
  const worker = cluster.fork();
  for (const stream of [worker.process.stdout, worker.process.stderr]) {
    if (stream) createInterface({ input: stream }).on('line', (line) => process.stdout.write(`${line.replace('listening on', 'worker listening at')}\n`));
  }
}

cluster.on('listening', (_worker, address) => {
  listening++;
  if (listening === workers) process.stdout.write(`listening on http://${address.address ?? '127.0.0.1'}:${address.port} (${workers} workers)\n`);
});

cluster.on('exit', (worker, code, signal) => {
  if (!stopping) {
    process.stderr.write(`fatal: gateway worker ${String(worker.process.pid)} exited (code ${String(code)}, signal ${String(signal)})\n`);
    stop(1);
  }
  if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0);
});

process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));
