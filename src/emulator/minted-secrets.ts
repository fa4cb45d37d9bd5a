/**
 * Test runs only: the secrets the emulator (and the test helpers) mint at run
 * time, appended to the file TEST_MINTED_SECRETS names, so that the test
 * suite's run-wide leak scan (test/support/run-wide-scan.ts) searches for them
 * as it does for the fixed test secrets. test/support/global-setup.ts sets the
 * variable; nowhere else does, so outside a test run this does nothing.
 */
import { appendFileSync } from 'node:fs';

export const MINTED_SECRETS_ENV = 'TEST_MINTED_SECRETS';

/** One `label\tvalue` line; the label (what minted it, never the value) is what a finding names. */
export function recordMintedSecret(label: string, value: string): void {
  const path = process.env[MINTED_SECRETS_ENV];
  if (path) appendFileSync(path, `${label}\t${value}\n`);
}
