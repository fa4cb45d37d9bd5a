import { describe, expect, it } from 'vitest';
import { modelMessage } from './tool-call-body.js';

const failed = (errorCode: string, status: 'failed' | 'indeterminate' = 'failed') => modelMessage({ id: 'x', status, errorCode, errorText: null, retryAfterSeconds: null });

describe('what the model is told', () => {
  it('VENDOR_ERROR: a refusal is not "try again later" — the same input fails the same way; a temporary failure only as a new tool call', () => {
    const text = failed('VENDOR_ERROR');
    expect(text).toMatch(/sending the same input again will fail the same way/);
    expect(text).toMatch(/as a new tool call/);
    expect(text).not.toMatch(/you may try again later\./);
  });

  it('OUTCOME_UNKNOWN: never resend a change; a lookup (a call swept after a crash may be one) may run again', () => {
    const text = failed('OUTCOME_UNKNOWN', 'indeterminate');
    expect(text).toMatch(/Do not send it again if it changes something/);
    expect(text).toMatch(/A lookup that changes nothing may be run again as a new tool call/);
    expect(text).not.toMatch(/reached the vendor/); // not known for a call found orphaned
  });
});
