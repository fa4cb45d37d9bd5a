import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the plain closing line CI reads: `N passed, N failed`. A file that
 * failed without a failed test (a beforeAll/afterAll hook threw, the file did
 * not load, its worker died) counts as one failure: the line never says
 * "0 failed" for a red run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown> = []): void {
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
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
