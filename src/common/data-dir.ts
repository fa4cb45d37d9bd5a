import * as nodeFs from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates the data folder (DATA_DIR, which holds master.key, pg.password and bootstrap-admin.key) and any missing
 * folder above it with a mode of their own, whatever the umask: 0700, or 0711 when started as root, where the embedded
 * cluster runs as the postgres system user, which must pass through it to its own folder. Under umask 000 it was
 * world-writable (another user could plant a link where a secret is written next); under root's umask 077 the
 * postgres user could not enter it and the first start failed. A folder that exists is left as it is
 * (scripts/pg-server.mjs does the same for the folders it creates). `fs`: a test's, to see each folder as it is made.
 * One level at a time, top down: Node's recursive mkdirSync never returns where mkdir answers ENOENT under a folder
 * that exists (under /proc or /sys), and the gateway spun a core for ever, deaf to SIGTERM. That is thrown here instead,
 * naming the folder.
 */
export function makeDataDir(dir: string, fs: Pick<typeof nodeFs, 'mkdirSync' | 'chmodSync' | 'existsSync'> = nodeFs): void {
  const missing: string[] = [];
  for (let d = resolve(dir); !fs.existsSync(d); d = dirname(d)) {
    missing.unshift(d);
    if (dirname(d) === d) break;
  }
  const mode = process.getuid?.() === 0 ? 0o711 : 0o700;
  for (const d of missing) {
    try {
      // Created 0700 (the umask can only narrow it): not one moment writable by others, who could plant a link there.
      fs.mkdirSync(d, { mode: 0o700 });
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'EEXIST') continue; // made meanwhile by another process: left as it is
      // Its code kept (ENOTDIR, EACCES, ENOENT…): callers name it as they name any other failure to make the folder.
      throw Object.assign(new Error(`DATA_DIR ${dir}: cannot create the folder ${d} (${String(code ?? err)})`, { cause: err }), { code });
    }
    fs.chmodSync(d, mode);
  }
}

/** The files DATA_DIR keeps whose content the gateway adopts when it finds them: the development master key, the embedded cluster's password. */
const ADOPTED_DATA_FILES = ['master.key', 'pg.password'] as const;

/**
 * Why the secrets found in `dir` (DATA_DIR) cannot be trusted, or undefined when they can (or the folder is not there
 * yet: makeDataDir makes it the gateway's own). A master.key or pg.password found there is adopted as it is, so the
 * folder and those files must be this user's (or root's) and writable by nobody else, and the files readable by nobody
 * else, as PostgreSQL asks of its data folder and ssh of a private key: otherwise another local user who made the
 * folder first (a DATA_DIR under /tmp), or can write to it, plants the key that then encrypts every credential, or the
 * cluster password the gateway's tools log in with. Not checked where there are no user ids (Windows).
 */
export function untrustedDataDir(dir: string, fs: Pick<typeof nodeFs, 'statSync'> = nodeFs): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const mine = (st: nodeFs.Stats): boolean => st.uid === uid || st.uid === 0;
  const mode = (st: nodeFs.Stats): string => (st.mode & 0o777).toString(8).padStart(3, '0');
  const stat = (path: string): nodeFs.Stats | undefined => {
    try {
      return fs.statSync(path, { throwIfNoEntry: false });
    } catch {
      return undefined; // under a regular file (ENOTDIR), or not reachable: said where it is used
    }
  };
  const folder = stat(dir);
  if (!folder?.isDirectory()) return undefined; // none yet, or not a folder (said where it is used: ENOTDIR)
  const fix = 'use a folder of your own (the default is .data in the checkout)';
  if (!mine(folder)) return `${dir} belongs to user ${folder.uid}, not to this one (${uid}) or root: its owner could replace the secrets kept there; ${fix}`;
  if (folder.mode & 0o022) return `${dir} can be written by others (mode ${mode(folder)}): they could replace the secrets kept there; chmod go-w ${dir}, or ${fix}`;
  for (const name of ADOPTED_DATA_FILES) {
    const path = resolve(dir, name);
    const file = stat(path);
    if (!file) continue;
    if (!mine(file)) return `${path} belongs to user ${file.uid}, not to this one (${uid}) or root: it was not made by the gateway; remove it, or ${fix}`;
    if (file.mode & 0o077) return `${path} can be read or written by others (mode ${mode(file)}): chmod 600 ${path}`;
  }
  return undefined;
}
