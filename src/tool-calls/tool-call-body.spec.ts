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

  it('VENDOR_ERROR with the vendor\'s status: 4xx a refusal (do not resend the same input), 5xx a failure on its side (later, as a new call), 2xx either', () => {
    const withStatus = (vendorStatus: number | null) =>
      modelMessage({ id: 'x', status: 'failed', errorCode: 'VENDOR_ERROR', errorText: null, retryAfterSeconds: null, vendorStatus });
    for (const st of [400, 409, 422]) {
      expect(withStatus(st), String(st)).toMatch(/^The vendor refused the request, and the action failed\. Sending the same input again will fail the same way/);
      expect(withStatus(st)).not.toMatch(/later/);
    }
    for (const st of [500, 502, 503]) {
      expect(withStatus(st), String(st)).toBe('The vendor failed on its side, and the action failed. It may work later, as a new tool call.');
    }
    // No answer to go by (a network failure, or refused before anything was sent): both possibilities, as before.
    expect(withStatus(null)).toBe(failed('VENDOR_ERROR'));
    // A 2xx carries refusals (Shopify userErrors) and failures on the vendor's side (GraphQL INTERNAL_SERVER_ERROR,
    // an unreadable body) alike: the model is told both, not that the same input will surely fail again.
    for (const st of [200, 201]) expect(withStatus(st), String(st)).toBe(failed('VENDOR_ERROR'));
    // Recorded with the executor's judgement, that decides, whatever the status.
    const judged = (vendorStatus: number | null, vendorRefused: boolean) =>
      modelMessage({ id: 'x', status: 'failed', errorCode: 'VENDOR_ERROR', errorText: null, retryAfterSeconds: null, vendorStatus, vendorRefused });
    for (const st of [200, 422, null]) expect(judged(st, true), String(st)).toMatch(/^The vendor refused the request, and the action failed\. Sending the same input again will fail the same way/);
    for (const st of [200, 502]) expect(judged(st, false), String(st)).toBe('The vendor failed on its side, and the action failed. It may work later, as a new tool call.');
    expect(judged(null, false)).toMatch(/^The vendor could not be reached or gave no usable answer, and the action failed\. It may work later/);
  });

  it('a rejection relays the decider\'s reason, quoted as JSON; none given (or only blanks) leaves the plain sentence', () => {
    const rejected = (errorCode: string, rejectionReason?: string | null) =>
      modelMessage({ id: 'x', status: 'blocked', errorCode, errorText: null, retryAfterSeconds: null, rejectionReason });
    expect(rejected('EXPERT_REJECTED', 'Refund exceeds "policy"; offer store credit\ninstead')).toBe(
      'An expert reviewed this action and rejected it, giving this reason: "Refund exceeds \\"policy\\"; offer store credit\\ninstead". It was not executed.',
    );
    expect(rejected('CLIENT_REJECTED', 'wrong order')).toBe('The customer rejected this action, giving this reason: "wrong order". It was not executed.');
    for (const none of [undefined, null, '', '  \t']) {
      expect(rejected('EXPERT_REJECTED', none)).toBe('An expert reviewed this action and rejected it. It was not executed.');
      expect(rejected('CLIENT_REJECTED', none)).toBe('The customer rejected this action. It was not executed.');
    }
    // Only a rejection says it: another blocked code given a reason (never the case for a stored row) ignores it.
    expect(rejected('APPROVAL_EXPIRED', 'late')).not.toContain('late');
  });

  it('OUTCOME_UNKNOWN: never resend a change; a lookup (a call swept after a crash may be one) may run again', () => {
    const text = failed('OUTCOME_UNKNOWN', 'indeterminate');
    expect(text).toMatch(/Do not send it again if it changes something/);
    expect(text).toMatch(/A lookup that changes nothing may be run again as a new tool call/);
    expect(text).not.toMatch(/reached the vendor/); // not known for a call found orphaned
  });
});

describe('a replayed refusal an admin can end', () => {
  it('says it is the recorded answer, which a resend repeats, for the flag and the credentials only', async () => {
    const { buildToolCallBody } = await import('./tool-call-body.js');
    const body = (errorCode: string, replayed: boolean) =>
      buildToolCallBody({ id: 'x', status: errorCode === 'FEATURE_DISABLED' ? 'blocked' : 'failed', errorCode, errorText: null, retryAfterSeconds: null }, { found: false }, 'toolu_1', replayed, 16_384).toolResult.content;
    for (const code of ['FEATURE_DISABLED', 'CREDENTIALS_INVALID', 'CREDENTIALS_NOT_FOUND']) {
      expect(body(code, true), code).toMatch(/This is the recorded answer of an earlier call with this tool_use id, and sending it again answers the same; once the problem is fixed, the action runs only as a new tool call\.$/);
      expect(body(code, false), code).not.toMatch(/recorded answer/);
    }
    expect(body('VENDOR_TIMEOUT', true)).not.toMatch(/recorded answer/);
  });
});
