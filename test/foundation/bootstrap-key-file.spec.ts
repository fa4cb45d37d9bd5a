import { lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';

/**
 * The platform admin key generated at a first start (no BOOTSTRAP_ADMIN_KEY, not production) is kept in
 * DATA_DIR/bootstrap-admin.key. It was written into whatever stood there: a link another local user planted in a
 * DATA_DIR they could write (one they made first under /tmp, a shared volume) took the key to a file of theirs. It is
 * now written to a file of its own and renamed over the name, which replaces a link instead of following it.
 */
describe('the generated admin key’s file', () => {
  const dataDir = resolve('.tmp', `bootstrap-key-file-${process.pid}`);
  let db: ScratchDatabase | undefined;
  let gw: GatewayProcess | undefined;
  afterAll(async () => {
    await gw?.stop();
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('replaces a link planted where it is written: the key never reaches the link’s target', async () => {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const theirs = join(dataDir, 'someone-elses-file');
    writeFileSync(theirs, '', { mode: 0o644 });
    symlinkSync(theirs, join(dataDir, 'bootstrap-admin.key'));
    db = await createScratchDatabase('tg_keyfile');
    gw = await startGatewayProcess({ NODE_ENV: 'development', BOOTSTRAP_ADMIN_KEY: undefined, DATABASE_URL: db.url, DATA_DIR: dataDir });
    const key = /generated a platform admin key \(shown once, also saved to [^)]+\):\s+(\S+)/.exec(gw.output())?.[1];
    expect(key, gw.output()).toBeDefined();
    expect(readFileSync(theirs, 'utf8').length, 'characters written into the link’s target').toBe(0);
    const file = join(dataDir, 'bootstrap-admin.key');
    expect(lstatSync(file).isSymbolicLink()).toBe(false);
    expect(lstatSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toBe(key);
  }, 90_000);
});
