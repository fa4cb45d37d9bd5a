/** The environment variable holding the run log's path (global-setup.ts sets it; run-log.ts writes to it). */
export const RUN_LOG_ENV = 'TEST_RUN_LOG';
/** Set in vitest's main process once the run-wide leak scan ran: "clean" or "findings" (run-wide-scan.ts). */
export const LEAK_SCAN_RESULT_ENV = 'TEST_RUN_LEAK_SCAN';
