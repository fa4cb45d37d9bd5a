// `npm run build`: compiles the sources to dist/ with `tsc -b`, which keeps what it built in dist/.tsbuildinfo and
// rebuilds an unchanged tree in about a second instead of 15 (CI builds three times in a row: build, migration:check,
// pretest; `npm start` builds before each start). Removing dist/ rebuilds it all.
// tsc trusts its build info for what it emitted: an output removed by hand (dist/src/main.js) never came back. A source
// whose output is missing therefore drops the build info first, and that build is a whole one.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const root = process.cwd();
const config = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8'));
const outDir = join(root, config.compilerOptions.outDir);
const buildInfo = join(root, config.compilerOptions.tsBuildInfoFile);

/** Sources under `dir` (relative to root) whose compiled file is not in outDir. */
function missingOutputs(dir) {
  const missing = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) missing.push(...missingOutputs(path));
    else if (/\.ts$/.test(entry.name) && !/\.(spec|spec-support|d)\.ts$/.test(entry.name)) {
      if (!existsSync(join(outDir, path.replace(/\.ts$/, '.js')))) missing.push(path);
    }
  }
  return missing;
}

if (existsSync(buildInfo) && config.include.some((dir) => existsSync(join(root, dir)) && missingOutputs(dir).length > 0)) {
  rmSync(buildInfo);
}
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const { status, signal } = spawnSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
process.exit(status ?? (signal ? 1 : 0));
