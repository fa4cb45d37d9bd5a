/**
 * Pinned after a mutation review found nothing did. Each case passes on this code and fails on the named
 * mutant of src/executor/failure-mapping.ts.
 */
import { describe, expect, it } from 'vitest';
import { refusedInput } from './failure-mapping.js';
import type { VendorOutcome } from '../vendors/vendor-handler.js';

type F = Extract<VendorOutcome, { ok: false }>;
const f = (kind: F['kind'], extra: Partial<F> = {}): F => ({ ok: false, kind, requestSent: true, message: kind, ...extra });

describe('refusedInput (failure-mapping.ts:144): the ledger\'s vendor_refused and the model\'s "same input fails the same way"', () => {
  // Mutant A2: drop `f.kind === 'too_large'` → a result over the cap is told "it may work later" (vendor_refused false):
  // the agent resends the same oversized read for ever. Mutant A3: drop `key_conflict` → vendor_refused false for a
  // key used with other parameters.
  it('a refusal of the input is refused; trouble on the vendor\'s side or on the way is not', () => {
    for (const kind of ['rejected', 'not_found', 'auth', 'too_large', 'key_conflict'] as const) expect(refusedInput(f(kind)), kind).toBe(true);
    for (const kind of ['server_error', 'timeout', 'network', 'bad_response', 'rate_limited', 'in_progress'] as const) expect(refusedInput(f(kind)), kind).toBe(false);
  });
});
