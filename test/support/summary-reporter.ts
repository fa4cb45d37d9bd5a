import type { Reporter, TestModule } from 'vitest/node';
import { runWideLeakScan } from './run-wide-scan.js';

/**
 * Prints the plain closing line CI reads: `N passed, N failed`. A file that
 * failed without a failed test (a beforeAll/afterAll hook threw, the file did
 * not load, its worker died) counts as one failure: the line never says
 * "0 failed" for a red run.
 *
 * The run-wide leak scan runs first (run-wide-scan.ts: here in vitest's main
 * process, before the global teardown drops the test database), and each of
 * its findings, a scan that could not run included, counts as a failure.
 */
export default class SummaryReporter implements Reporter {
  async onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown> = []): Promise<void> {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      let failedHere = 0;
      for (const t of mod.children.allTests()) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failedHere++;
        else skipped++;
      }
      // The file itself failed (its errors are on the module, not on a test).
      if (failedHere === 0 && (mod.state() === 'failed' || mod.errors().length > 0)) failedHere = 1;
      failed += failedHere;
    }
    // An error outside any test file (a crashed worker, an unhandled rejection) fails the run too.
    failed += unhandledErrors.length;
    failed += (await runWideLeakScan())?.length ?? 0;
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
