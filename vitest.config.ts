import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';
import { testWorkers } from './test/support/test-workers.js';

const workers = testWorkers();

export default defineConfig({
  plugins: [
    swc.vite({
      module: { type: 'es6' },
      jsc: {
        target: 'es2023',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
      },
    }),
  ],
  test: {
    environment: 'node',
    include: ['test/**/*.spec.ts', 'src/**/*.spec.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: [
      'test/support/worker-database-setup.ts', // each worker's own database (worker-database.ts)
      'test/support/run-log-setup.ts', // every worker's output goes to the run log too (run-log.ts)
    ],
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    // Two files at a time, each worker on a database of its own (worker-database.ts). One worker left the 2-core CI
    // machine idle ≈ 60 % of the run: most files wait (on a child gateway's start or drain, a vendor's held answer,
    // an expiry) more than they compute. TEST_WORKERS=1 runs one file at a time.
    maxWorkers: workers,
    // A worker process runs file after file, its modules loaded once: each file in a fresh process spent ≈ 2 s importing
    // Nest, TypeORM and the app again (257 s of a 1,260 s run). What a file leaves behind in the process (Nest's static
    // logger, the run log's tees on globalThis) is either shared by design or reset by the test that depends on it.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 90_000,
  },
});
