/**
 * The production image holds package.json, node_modules, dist/ and scripts/ — no TypeScript sources or
 * tsconfig (Dockerfile). `npm start`, `npm run migration:run` and `migration:show` began with `npm run build`,
 * which failed there (TS5058): the migration scripts never ran, and `migration:show` exited 1 — "migrations
 * pending" — on an up-to-date database. They now build only where the sources are (scripts/build-if-sources.mjs).
 *
 * The image's /app is laid out in a temporary folder: package.json and scripts/ copied, dist/ and node_modules
 * linked (what `npm ci --omit=dev` installs is a subset of them).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const app = resolve('.tmp', `image-app-${process.pid}-${Date.now()}`);
mkdirSync(app, { recursive: true });
cpSync('package.json', join(app, 'package.json'));
cpSync('scripts', join(app, 'scripts'), { recursive: true });
symlinkSync(resolve('dist'), join(app, 'dist'));
symlinkSync(resolve('node_modules'), join(app, 'node_modules'));
afterAll(() => rmSync(app, { recursive: true, force: true }));

const npm = (script: string) =>
  spawnSync('npm', ['run', '-s', script], {
    cwd: app,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', DATABASE_URL: process.env.DATABASE_URL },
    timeout: 120_000,
  });

describe('the package scripts inside the production image (no sources)', () => {
  it('migration:run and migration:show run against the database without building: exit 0, no TS5058', () => {
    const run = npm('migration:run');
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout + run.stderr).not.toMatch(/TS5058|tsconfig/);
    const show = npm('migration:show');
    expect(show.status, show.stdout + show.stderr).toBe(0);
    expect(show.stdout).toContain('no pending migrations');
    expect(existsSync(join(app, 'tsconfig.build.json'))).toBe(false);
  }, 240_000);
});
