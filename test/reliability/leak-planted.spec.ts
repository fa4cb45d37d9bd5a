import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * A test secret planted in each place the suite's leak scans claim to read fails the run: a vitest of its own (the
 * suite's global setup, teardown and reporters) on fixtures/leak-plant.fixture.ts, PLANT saying where. The run log
 * and the run's database are read by the run-wide scan (run-wide-scan.ts); a dedicated PostgreSQL (outage.spec.ts's)
 * is gone by then, so its close() scans it and the spec fails.
 */
interface Run {
  code: number;
  out: string;
  err: string;
}

/** Where the dedicated PostgreSQL of the dedicated-pg-row case keeps its data (deleted by its close()). */
const PG_DIR = resolve('.tmp', `pg-leak-plant-${process.pid}`);
afterAll(() => rmSync(PG_DIR, { recursive: true, force: true }));

function plantedRun(plant: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(?:VITEST|TEST_)/.test(k)) env[k] = v; // this run's, not the child's
  env.DATABASE_URL = process.env.TEST_SERVER_URL; // the child's global setup makes its own database there
  env.PLANT = plant;
  env.PLANT_PG_DIR = PG_DIR;
  env.NO_COLOR = '1';
  return new Promise((resolveRun) => {
    execFile(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/reliability/fixtures/leak-plant.config.ts'], { env, maxBuffer: 1 << 26 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      // The kept run log holds the planted secret: removed.
      const kept = /run log kept at (\S+)\)/.exec(stderr)?.[1];
      if (kept) rmSync(dirname(kept), { recursive: true, force: true });
      resolveRun({ code, out: stdout, err: stderr });
    });
  });
}
const scanLine = (r: Run): string => r.out.split('\n').find((l) => l.startsWith('run-wide leak scan:')) ?? `(no scan line)\n${r.out.slice(-2000)}\n${r.err.slice(-2000)}`;

describe('a secret planted where a leak scan claims to look fails the run', () => {
  // Places planted in one run each have their own secret, so each finding names its place (a vitest of its own takes
  // ≈ 8 s). metrics-label runs alone: its app migrates the database, where encrypted-column-plaintext makes its own
  // vendor_tokens table.
  it.each<[plant: string, findings: string[]]>([
    [
      'child-log=JUMIO_CLIENT_SECRET,shared-db-row=NANGO_SECRET_KEY,encrypted-column-plaintext=SHOPIFY_REFRESH_TOKEN',
      [
        'JUMIO_CLIENT_SECRET (plain) in the run log',
        'NANGO_SECRET_KEY (plain) in table planted, column x: 1 row(s)',
        // plaintext where AES-GCM ciphertext belongs: the encrypted columns are scanned too
        'SHOPIFY_REFRESH_TOKEN (plain, as bytes (hex)) in table vendor_tokens, column ciphertext: 1 row(s)',
      ],
    ],
    ['metrics-label=SHOPIFY_CLIENT_SECRET', ['SHOPIFY_CLIENT_SECRET (plain) in the run log']],
  ])('by the run-wide scan: planted as %s', async (plant, findings) => {
    const r = await plantedRun(plant);
    expect(r.out, r.err.slice(-3000)).toContain('1 passed'); // the fixture itself ran
    expect(scanLine(r), plant).toMatch(new RegExp(`: ${findings.length} finding\\(s\\)$`));
    for (const finding of findings) expect(r.err).toContain(finding);
    expect(r.code).toBe(1);
  }, 60_000);

  it('by the dedicated PostgreSQL\'s close(), which the run-wide scan never reads: planted in a row there', async () => {
    const r = await plantedRun('dedicated-pg-row');
    const all = `${r.out}\n${r.err}`;
    expect(all, r.err.slice(-3000)).toContain('1 failed');
    expect(all).toMatch(/leak scan of the dedicated PostgreSQL of \S+ before its deletion: 1 finding\(s\):\n\s+- JUMIO_CLIENT_SECRET \(plain\) in table planted, column x: 1 row\(s\)/);
    expect(scanLine(r)).toMatch(/: 0 finding\(s\)$/); // gone before the run-wide scan: only close() could see it
    expect(r.code).toBe(1);
    expect(existsSync(PG_DIR), 'the data folder, deleted whatever the scan found').toBe(false);
  }, 60_000);
});
