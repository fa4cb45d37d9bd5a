// Builds dist/ from the TypeScript sources when they are here (a checkout), and does nothing where they are not:
// the production image holds dist/ and scripts/ only, and `npm run build` there failed (TS5058, no
// tsconfig.build.json), so `npm start`, `npm run migration:run` and `migration:show` failed before doing anything —
// and `migration:show` exited 1, which means "migrations pending", on an up-to-date database.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (existsSync(join(root, 'tsconfig.build.json')) && existsSync(join(root, 'src'))) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const { status, signal } = spawnSync(npm, ['run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(status ?? (signal ? 1 : 0));
}
