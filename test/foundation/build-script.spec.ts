/**
 * `npm run build` (scripts/build.mjs) compiles with `tsc -b` and keeps its build info in dist/: an unchanged tree
 * builds in about a second, not 15 (CI builds three times in a row). tsc trusts that build info for what it emitted,
 * so an output removed by hand never came back; the script now drops the build info when a source's output is missing.
 *
 * A small project of its own in a temporary folder: the script builds whatever tsconfig.build.json the folder it runs
 * in has, as npm runs it in the package root.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const project = resolve('.tmp', `build-script-${process.pid}-${Date.now()}`);
afterAll(() => rmSync(project, { recursive: true, force: true }));

const build = () => spawnSync(process.execPath, [resolve('scripts/build.mjs')], { cwd: project, encoding: 'utf8', timeout: 60_000 });

describe('npm run build (scripts/build.mjs)', () => {
  it('builds once, leaves an unchanged tree alone, brings back an output removed by hand, and fails on a type error', () => {
    mkdirSync(join(project, 'src', 'nested'), { recursive: true });
    writeFileSync(
      join(project, 'tsconfig.build.json'),
      JSON.stringify({
        compilerOptions: {
          rootDir: '.', outDir: 'dist', incremental: true, tsBuildInfoFile: 'dist/.tsbuildinfo',
          target: 'ES2023', module: 'nodenext', moduleResolution: 'nodenext', strict: true, types: [], lib: ['es5'], // the smallest lib: 4 builds in seconds
        },
        include: ['src'],
        exclude: ['**/*.spec.ts'],
      }),
    );
    writeFileSync(join(project, 'src', 'a.ts'), 'export const a: number = 1;\n');
    writeFileSync(join(project, 'src', 'nested', 'b.ts'), "export const b: string = 'b';\n");
    writeFileSync(join(project, 'src', 'a.spec.ts'), 'export const spec = 1;\n');

    const first = build();
    expect(first.status, first.stdout + first.stderr).toBe(0);
    const a = join(project, 'dist', 'src', 'a.js');
    const b = join(project, 'dist', 'src', 'nested', 'b.js');
    expect(existsSync(a) && existsSync(b)).toBe(true);
    expect(existsSync(join(project, 'dist', 'src', 'a.spec.js'))).toBe(false); // excluded: never "missing"
    const builtAt = statSync(a).mtimeMs;

    const again = build();
    expect(again.status, again.stdout + again.stderr).toBe(0);
    expect(statSync(a).mtimeMs).toBe(builtAt); // incremental: nothing rewritten

    rmSync(b);
    const restored = build();
    expect(restored.status, restored.stdout + restored.stderr).toBe(0);
    expect(existsSync(b)).toBe(true); // before: tsc -b said up to date and left it missing

    writeFileSync(join(project, 'src', 'a.ts'), "export const a: number = 'not a number';\n");
    const broken = build();
    expect(broken.status).toBe(1);
    expect(broken.stdout + broken.stderr).toContain('TS2322');
  }, 120_000);
});
