// Whether a postgres left running on our data folder is an orphan (scripts/pg-server.mjs's stopOrphanedServer): a
// pure judgement on what /proc says of it, kept apart so it can be tested without killing processes.

/**
 * A postgres that is no zombie, and whose pg-server is gone: re-parented to PID 1, or — under a child subreaper
 * (`systemd --user`, which every desktop terminal and IDE runs under; `tini -s`; a supervisor) — to a live process
 * that is no pg-server, when the postgres itself was started by one (it inherits PG_DATA_DIR from it). A postgres
 * whose parent is a live pg-server is another gateway's; one started by hand (no PG_DATA_DIR) is never taken for an
 * orphan unless its parent is PID 1, as before.
 *
 * @param {{ state: string, ppid: number, environ: readonly string[] | undefined, parentCmdline: readonly string[] | undefined }} p
 *   `environ`: the postgres's environment entries (undefined: unreadable); `parentCmdline`: its parent's argv
 *   (undefined: unreadable, or the parent is gone).
 * @returns {boolean}
 */
export function orphanedPostmaster({ state, ppid, environ, parentCmdline }) {
  if (state === 'Z') return false;
  if (ppid === 1) return true;
  const startedByPgServer = environ?.some((entry) => entry.startsWith('PG_DATA_DIR=')) === true;
  const parentIsPgServer = parentCmdline?.some((arg) => arg.endsWith('pg-server.mjs')) === true;
  return startedByPgServer && parentCmdline !== undefined && !parentIsPgServer;
}
