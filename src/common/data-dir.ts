import * as nodeFs from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates the data folder (DATA_DIR, which holds master.key, pg.password and bootstrap-admin.key) and any missing
 * folder above it with a mode of their own, whatever the umask: 0700, or 0711 when started as root, where the embedded
 * cluster runs as the postgres system user, which must pass through it to its own folder. Under umask 000 it was
 * world-writable (another user could plant a link where a secret is written next); under root's umask 077 the
 * postgres user could not enter it and the first start failed. A folder that exists is left as it is
 * (scripts/pg-server.mjs does the same for the folders it creates). `fs`: a test's, to see each folder as it is made.
 */
export function makeDataDir(dir: string, fs: Pick<typeof nodeFs, 'mkdirSync' | 'chmodSync'> = nodeFs): void {
  // Created 0700 (the umask can only narrow it): not one moment writable by others, who could plant a link there.
  const first = fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (first === undefined) return;
  const mode = process.getuid?.() === 0 ? 0o711 : 0o700;
  const top = resolve(first);
  for (let d = resolve(dir); ; d = dirname(d)) {
    fs.chmodSync(d, mode);
    if (d === top || dirname(d) === d) break;
  }
}
