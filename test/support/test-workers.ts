/**
 * How many vitest workers run files at the same time (vitest.config.ts maxWorkers): TEST_WORKERS, else 2. Each has a
 * database of its own (worker-database.ts), all on the one test server.
 */
export function testWorkers(env: NodeJS.ProcessEnv = process.env): number {
  const workers = Number(env.TEST_WORKERS ?? '2');
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`TEST_WORKERS must be a whole number ≥ 1, not ${JSON.stringify(env.TEST_WORKERS)}`);
  return workers;
}

/**
 * The server connections one worker's files may hold at once: replicas.spec.ts runs three gateways of 20 connections
 * (60 measured) beside the spec's own clients, and crash.spec.ts 31. A server that allows fewer than this many per
 * worker can refuse a gateway's connection ("too many clients") when two such files run together.
 */
export const CONNECTIONS_PER_WORKER = 90;

/** The warning global-setup.ts prints when the server's max_connections is short of the workers' need, else undefined. */
export function connectionShortfall(maxConnections: number, workers: number): string | undefined {
  const need = workers * CONNECTIONS_PER_WORKER + 10; // and the run's own sessions (the leak scan, the setup)
  if (maxConnections >= need) return undefined;
  return (
    `the test server allows ${maxConnections} connections; ${workers} test workers may need ${need} (${CONNECTIONS_PER_WORKER} each): ` +
    `a file starting several gateways can be refused connections ("too many clients"). Raise max_connections, or run with TEST_WORKERS=${Math.max(1, Math.floor((maxConnections - 10) / CONNECTIONS_PER_WORKER))}`
  );
}
