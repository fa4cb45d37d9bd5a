/**
 * The gateway's start-up and stop, loaded by main.ts once the stop signals have their handlers (stop-signals.ts).
 */
import 'reflect-metadata';
import { chmodSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { join, resolve } from 'node:path';
import { beginHttpDrain } from './app.setup.js';
import { makeDataDir, untrustedDataDir } from './common/data-dir.js';
import { createGateway, type Gateway } from './bootstrap.js';
import { MigrationsPendingBehindPooler, MigrationsStopped } from './db/migration-runner.js';
import { loadConfig, type AppConfig } from './config/app-config.js';
import { ConfigError } from './config/config.schema.js';
import { probeDatabase } from './db/database-probe.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded-postgres.js';
import { loggableErrorText } from './common/errors/loggable-error.js';
import { StopNotice } from './health/stop-notice.js';
import { onStopRequested, stopRequested } from './stop-signals.js';
import { ToolCallLedger } from './tool-calls/tool-call-ledger.js';
import { write as writeOutput } from './logging/output-streams.js';

async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      writeOutput('stderr', `${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  for (const w of config.warnings) writeOutput('stderr', `warning: ${w}\n`);

  let embedded: EmbeddedPostgres | undefined;
  /** How the embedded PostgreSQL's helper exited, if it has; what to do about it once the drain can be done. */
  let helperExit: string | undefined;
  let onHelperExit: (() => void) | undefined;
  if (config.DATABASE_URL) {
    // One clear line instead of the framework's retries with stack traces: a wrong password or database name at
    // once, a database still starting after up to 30 s of waiting.
    const problem = await probeDatabase(config.DATABASE_URL, {
      budgetMs: 30_000,
      intervalMs: 2_000,
      onWait: (line) => writeOutput('stderr', `${line}\n`),
      stopped: () => stopRequested() !== undefined,
      queryTimeoutMs: config.DB_QUERY_TIMEOUT_MS,
      connectionMode: config.DB_CONNECTION_MODE,
      poolSize: config.DB_POOL_SIZE,
      onWarning: (line) => writeOutput('stderr', `warning: ${line}\n`),
    });
    if (stopRequested()) process.exit(0);
    if (problem) {
      writeOutput('stderr', `fatal: ${problem}\n`);
      process.exit(1);
    }
  } else {
    // DATA_DIR made here (0700) if it is not there yet, and checked again (loadConfig's check passes a folder not yet
    // made): one another user made since is refused before the helper adopts a pg.password planted in it. A folder
    // that cannot be made is said by the helper, naming DATA_DIR.
    try {
      makeDataDir(config.DATA_DIR);
    } catch {
      /* said by the helper */
    }
    const untrusted = untrustedDataDir(resolve(config.DATA_DIR));
    if (untrusted) {
      writeOutput('stderr', `fatal: DATA_DIR: ${untrusted}\n`);
      process.exit(1);
    }
    embedded = await startEmbeddedPostgres(join(config.DATA_DIR, 'pg'));
    config = { ...config, DATABASE_URL: embedded.url }; // DB_CONNECTION_MODE is direct without a DATABASE_URL (loadConfig)
    writeOutput('stderr', `embedded PostgreSQL started (data in ${join(config.DATA_DIR, 'pg')})\n`);
    embedded.child.once('exit', (code, signal) => {
      helperExit = `code ${String(code)}, signal ${String(signal)}`;
      onHelperExit?.();
    });
  }

  const stopEmbedded = async (): Promise<void> => {
    await embedded?.stop();
  };
  if (stopRequested()) {
    await stopEmbedded();
    process.exit(0);
  }
  const dataDir = config.DATA_DIR;
  let gateway: Gateway;
  try {
    gateway = await createGateway(config, {}, {
      onGeneratedAdminKey: (key) => showGeneratedKey(dataDir, key),
      stopRequested: () => stopRequested() !== undefined,
      onMigrationWait: () => writeOutput('stderr', 'waiting for another replica to finish migrating the database\n'),
    });
  } catch (err) {
    if (err instanceof MigrationsPendingBehindPooler) {
      writeOutput('stderr', `fatal: ${err.message}\n`);
      process.exit(1);
    }
    if (!(err instanceof MigrationsStopped)) throw err;
    await stopEmbedded();
    process.exit(0);
  }
  const { app } = gateway;
  let stopping: Promise<void> | undefined;
  let listening = false;
  /** Drains (README "Stopping") and exits; once, whoever asks first (a signal, a failed listen). */
  const shutdown = (exitCode = 0): Promise<void> =>
    (stopping ??= (async () => {
      let code = exitCode;
      // Out of rotation before the listener closes (SHUTDOWN_DELAY_MS): /readyz fails while requests are still served,
      // for a load balancer or Kubernetes that keeps routing for a while after the stop signal. Not when it never listened.
      if (config.SHUTDOWN_DELAY_MS > 0 && listening) {
        app.get(StopNotice).announce();
        writeOutput('stderr', `stopping: /readyz answers 503, serving for ${config.SHUTDOWN_DELAY_MS} ms more (SHUTDOWN_DELAY_MS), then draining\n`);
        await new Promise((r) => setTimeout(r, config.SHUTDOWN_DELAY_MS));
      }
      beginHttpDrain(app);
      const ledger = app.get(ToolCallLedger, { strict: false });
      await app.close().catch((err: unknown) => {
        code = 1; // a failed close is not a clean stop
        writeOutput('stderr', `shutdown failed: ${loggableErrorText(err)}\n`);
      });
      // Nor is one that lost what a vendor answered: those calls are left for the orphan sweep (indeterminate).
      if (ledger.droppedAtStop > 0) {
        code = 1;
        writeOutput('stderr', 
          `shutdown: ${ledger.droppedAtStop} outcome(s) not recorded (the database was unavailable while stopping): the orphan sweep marks those calls indeterminate, to reconcile (see the warn lines "not recorded")\n`,
        );
      }
      await stopEmbedded();
      process.exit(code);
    })());
  // The embedded PostgreSQL's helper (scripts/pg-server.mjs) starts PostgreSQL again when it dies. The helper gone, a
  // PostgreSQL that died next would leave this gateway unready for good with nothing to notice it: it stops instead,
  // drained (the PostgreSQL the helper leaves behind usually still serves), exit 1, for a supervisor to start it again.
  // Also when it died during start-up (the migrations, the sweeps): then the gateway never listens.
  const helperGone = (): void => {
    if (stopping) return;
    writeOutput('stderr', `fatal: the embedded PostgreSQL's helper exited (${helperExit}): nothing would start PostgreSQL again; stopping\n`);
    void shutdown(1);
  };
  if (helperExit !== undefined) helperGone();
  else onHelperExit = helperGone;
  if (stopping) {
    await stopping;
    return;
  }
  if (stopRequested()) {
    await shutdown(); // asked to stop during start-up: never start listening
    return;
  }
  try {
    await app.listen(config.PORT, config.HOST);
  } catch (err) {
    // A port taken, a HOST that does not resolve: start-up has run by now, and its approvals sweep may have sent
    // approved calls to their vendors. Those finish and are recorded (app.close() waits for them) before exit 1.
    writeOutput('stderr', `fatal: cannot listen on ${config.HOST}:${config.PORT}: ${loggableErrorText(err)}\n`);
    await shutdown(1);
    return;
  }
  listening = true;
  const addr = app.getHttpServer().address() as { port: number } | null;
  // An IPv6 host is bracketed (http://[::1]:3000): the line is a URL people and tools copy.
  const host = isIPv6(config.HOST) ? `[${config.HOST}]` : config.HOST;
  writeOutput('stdout', `tool-gateway listening on http://${host}:${addr?.port ?? config.PORT} (docs at /docs)\n`);

  onStopRequested(() => void shutdown());
  if (stopRequested()) void shutdown(); // arrived between the check above and now
}

/**
 * Printed once, on the start that created it, whatever happens to the copy kept (mode 600) in the data folder
 * or to this start (a stop, a failed init, a port taken): the key is already in the database, and no later start
 * shows it again. So as soon as it is committed, not once the gateway is up.
 */
function showGeneratedKey(dataDir: string, key: string): void {
  const file = join(dataDir, 'bootstrap-admin.key');
  let saved = `also saved to ${file}`;
  // Written to a file of its own (created here, 0600), then renamed over the name: a file or link already there (in a
  // DATA_DIR someone else could write) is replaced, never written into, so the key cannot land in a file another user
  // made and can read.
  const partial = `${file}.${process.pid}`;
  try {
    makeDataDir(dataDir);
    writeFileSync(partial, key + '\n', { mode: 0o600, flag: 'wx' });
    chmodSync(partial, 0o600);
    renameSync(partial, file);
  } catch (err) {
    rmSync(partial, { force: true });
    saved = `NOT saved: ${file} could not be written (${(err as NodeJS.ErrnoException).code ?? 'error'}); copy it now`;
  }
  writeOutput('stdout', `\nNo BOOTSTRAP_ADMIN_KEY set: generated a platform admin key (shown once, ${saved}):\n\n  ${key}\n\n`);
}

main().catch((err: unknown) => {
  writeOutput('stderr', `fatal: ${loggableErrorText(err)}\n`);
  process.exit(1);
});
