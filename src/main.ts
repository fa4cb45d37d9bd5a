import 'reflect-metadata';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createGateway } from './bootstrap.js';
import { loadConfig, type AppConfig } from './config/app-config.js';
import { ConfigError } from './config/config.schema.js';
import { probeDatabase } from './db/database-probe.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded-postgres.js';

/**
 * SIGTERM / SIGINT at any time, start-up included: in a container Node is PID 1, and PID 1
 * ignores a signal it has no handler for, so a stop sent while migrations wait for another
 * replica's lock did nothing until the SIGKILL. Before the gateway is up the stop is
 * remembered and carried out as soon as start-up returns (migrations are transactions; the
 * start-up sweep's calls finish and are recorded); after, it drains (see README "Stopping").
 */
let stopRequested: string | undefined;
let stopNow: ((signal: string) => void) | undefined;
const onSignal = (signal: string): void => {
  if (stopRequested) return;
  stopRequested = signal;
  process.stderr.write(`${signal} received, shutting down\n`);
  stopNow?.(signal);
};
process.once('SIGTERM', () => onSignal('SIGTERM'));
process.once('SIGINT', () => onSignal('SIGINT'));

async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  for (const w of config.warnings) process.stderr.write(`warning: ${w}\n`);

  let embedded: EmbeddedPostgres | undefined;
  if (config.DATABASE_URL) {
    // One clear line instead of the framework's retries with stack traces: a wrong password or database name at
    // once, a database still starting after up to 30 s of waiting.
    const problem = await probeDatabase(config.DATABASE_URL, {
      budgetMs: 30_000,
      intervalMs: 2_000,
      onWait: (line) => process.stderr.write(`${line}\n`),
      stopped: () => stopRequested !== undefined,
    });
    if (stopRequested) process.exit(0);
    if (problem) {
      process.stderr.write(`fatal: ${problem}\n`);
      process.exit(1);
    }
  } else {
    embedded = await startEmbeddedPostgres(join(config.DATA_DIR, 'pg'));
    config = { ...config, DATABASE_URL: embedded.url };
    process.stderr.write(`embedded PostgreSQL started (data in ${join(config.DATA_DIR, 'pg')})\n`);
  }

  const stopEmbedded = async (): Promise<void> => {
    await embedded?.stop();
  };
  if (stopRequested) {
    await stopEmbedded();
    process.exit(0);
  }
  const { app, generatedAdminKey } = await createGateway(config);
  const shutdown = async (): Promise<void> => {
    let code = 0;
    await app.close().catch((err: unknown) => {
      code = 1; // a failed close (an outcome not written, say) is not a clean stop
      process.stderr.write(`shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`);
    });
    await stopEmbedded();
    process.exit(code);
  };
  if (stopRequested) {
    await shutdown(); // asked to stop during start-up: never start listening
    return;
  }
  if (generatedAdminKey) {
    // Printed once, on the start that created it, whatever happens to the copy kept (mode 600) in the data
    // folder: the key is already in the database, and no later start shows it again.
    const file = join(config.DATA_DIR, 'bootstrap-admin.key');
    let saved = `also saved to ${file}`;
    try {
      mkdirSync(config.DATA_DIR, { recursive: true });
      writeFileSync(file, generatedAdminKey + '\n', { mode: 0o600 });
      chmodSync(file, 0o600);
    } catch (err) {
      saved = `NOT saved: ${file} could not be written (${(err as NodeJS.ErrnoException).code ?? 'error'}); copy it now`;
    }
    process.stdout.write(`\nNo BOOTSTRAP_ADMIN_KEY set: generated a platform admin key (shown once, ${saved}):\n\n  ${generatedAdminKey}\n\n`);
  }
  await app.listen(config.PORT, config.HOST);
  const addr = app.getHttpServer().address() as { port: number } | null;
  process.stdout.write(`tool-gateway listening on http://${config.HOST}:${addr?.port ?? config.PORT} (docs at /docs)\n`);

  stopNow = () => void shutdown();
  if (stopRequested) void shutdown(); // arrived between the check above and now
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
