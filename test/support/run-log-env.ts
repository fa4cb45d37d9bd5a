/** The environment variable holding the run log's path (global-setup.ts sets it; run-log.ts writes to it). */
export const RUN_LOG_ENV = 'TEST_RUN_LOG';
