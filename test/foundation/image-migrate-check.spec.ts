/**
 * The production image holds package.json, node_modules, dist/ and scripts/, not the sources (Dockerfile). There
 * `migrate.js check`, which compares the migration sources with index.ts, applied, reverted and re-applied every
 * migration on a scratch database and then failed on the missing migrations/ folder. It now says at once what it needs.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/common/project-root.js';
import { teeChildToRunLog } from '../support/run-log.js';

describe('migrate check where only dist/ is (the production image)', () => {
  const app = join(projectRoot(), '.tmp', `image-like-${process.pid}`);
  afterAll(() => rmSync(app, { recursive: true, force: true }));

  it('exits 2 at once saying it needs the sources, and creates no scratch database', async () => {
    rmSync(app, { recursive: true, force: true });
    mkdirSync(app, { recursive: true });
    cpSync(join(projectRoot(), 'package.json'), join(app, 'package.json'));
    cpSync(join(projectRoot(), 'dist'), join(app, 'dist'), { recursive: true });
    symlinkSync(join(projectRoot(), 'node_modules'), join(app, 'node_modules'), 'dir');
    const child = spawn(process.execPath, ['dist/src/cli/migrate.js', 'check'], {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', DATABASE_URL: process.env.DATABASE_URL ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    teeChildToRunLog(child, 'CLI migrate.js check without the sources');
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(stderr.trim()).toBe('check needs the sources (a checkout of the repository: it reads migrations/*.ts); nothing was done');
    expect(code).toBe(2);
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname = $1`, [`tg_drift_${child.pid!}`]);
      expect(rows).toEqual([]);
    } finally {
      await admin.end();
    }
  }, 60_000);
});
