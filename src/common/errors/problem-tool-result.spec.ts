import { describe, expect, it } from 'vitest';
import { echoableToolUseId } from '../../tool-calls/tool-use.js';
import { AppError } from './app-error.js';
import { withToolResult } from './problem-tool-result.js';

const contentOf = (e: AppError): unknown => (withToolResult(e, 'toolu_1').extra.fields?.toolResult as { content: string }).content;

describe('withToolResult', () => {
  it('a 503 after the call was recorded and started says its outcome is unknown, never that it did not run', () => {
    const ran = new AppError('DATABASE_UNAVAILABLE', 'x', { fields: { toolCallId: '3f0c1a52-7f0e-4c3e-9b7e-1d2a3b4c5d6e', outcomeConfirmed: false } });
    expect(contentOf(ran)).toMatch(/^This action was started, but its outcome could not be recorded yet/);
    // Without one: a fresh action was not run, but a resent one read from the ledger may have been earlier.
    expect(contentOf(new AppError('DATABASE_UNAVAILABLE', 'x'))).toMatch(/^This action could not be handled: .*If this same action was requested before, it may already have run/);
    expect(contentOf(new AppError('INTERNAL', 'x'))).toBe('The tool service could not answer for this action (INTERNAL); it is not known whether it ran.');
  });

  it('keeps the problem as it was (code, detail, retry, other fields) and adds toolUseId and an is_error tool_result', () => {
    const e = new AppError('RATE_LIMITED', 'slow down', { retryAfterSeconds: 2, fields: { a: 1 } });
    const out = withToolResult(e, 'call_0');
    expect([out.code, out.detail, out.extra.retryAfterSeconds]).toEqual(['RATE_LIMITED', 'slow down', 2]);
    expect(out.extra.fields).toEqual({
      a: 1,
      toolUseId: 'call_0',
      toolResult: { type: 'tool_result', tool_use_id: 'call_0', is_error: true, content: 'This action was not run: too many actions were asked for at once. It can be tried again shortly.' },
    });
    expect(withToolResult(e, null)).toBe(e);
  });
});

describe('echoableToolUseId', () => {
  it('an id of the accepted shape, not one holding a credential\'s, nor anything else', () => {
    expect(echoableToolUseId({ id: 'toolu_01A' })).toBe('toolu_01A');
    expect(echoableToolUseId({ id: 'has space' })).toBeNull();
    expect(echoableToolUseId({ id: 'x'.repeat(256) })).toBeNull();
    expect(echoableToolUseId({ id: 42 })).toBeNull();
    expect(echoableToolUseId(['toolu_01A'])).toBeNull();
    expect(echoableToolUseId({ id: `sk-ant-api03-${'a'.repeat(90)}` })).toBeNull();
  });
});
