import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

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
    setupFiles: ['test/support/run-log-setup.ts'], // every worker's output goes to the run log too (run-log.ts)
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    fileParallelism: false, // one shared test database
    // One worker process runs every file, its modules loaded once: each file in a fresh process spent ≈ 2 s importing
    // Nest, TypeORM and the app again (257 s of a 1,260 s run). What a file leaves behind in the process (Nest's static
    // logger, the run log's tees on globalThis) is either shared by design or reset by the test that depends on it.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 90_000,
  },
});
