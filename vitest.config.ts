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
    testTimeout: 30_000,
    hookTimeout: 90_000,
  },
});
