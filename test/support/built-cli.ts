/**
 * A built command-line tool (dist/src/cli/<name>.js) run as an operator runs it, against the test database:
 * its own process, a minimal environment (PATH, NODE_ENV=test, DATABASE_URL, plus `env`), its output copied to
 * the run log for the run-wide leak scan.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/common/project-root.js';
import { teeChildToRunLog } from './run-log.js';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export async function runBuiltCli(name: string, args: string[] = [], env: Record<string, string> = {}): Promise<CliRun> {
  const cli = join(projectRoot(), `dist/src/cli/${name}.js`);
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first (npm test does)`);
  const child = spawn(process.execPath, [cli, ...args], {
    cwd: projectRoot(),
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  teeChildToRunLog(child, `CLI dist/src/cli/${name}.js`);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
