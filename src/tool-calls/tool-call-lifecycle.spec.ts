import { describe, expect, it } from 'vitest';
import {
  assertTransition,
  canTransition,
  IllegalTransitionError,
  isSettled,
  isTerminal,
  isToolCallStatus,
  TOOL_CALL_STATUSES,
  TOOL_CALL_TRANSITIONS,
  type ToolCallStatus,
} from './tool-call-lifecycle.js';

const LEGAL: Array<[ToolCallStatus, ToolCallStatus]> = [
  ['requested', 'blocked'],
  ['requested', 'waiting_approval'],
  ['requested', 'running'],
  ['requested', 'failed'],
  ['waiting_approval', 'approved'],
  ['waiting_approval', 'blocked'],
  ['approved', 'running'],
  ['approved', 'blocked'],
  ['running', 'succeeded'],
  ['running', 'failed'],
  ['running', 'indeterminate'],
  ['indeterminate', 'succeeded'],
  ['indeterminate', 'failed'],
];

const key = (from: string, to: string): string => `${from}→${to}`;
const legalKeys = new Set(LEGAL.map(([f, t]) => key(f, t)));
const ILLEGAL = TOOL_CALL_STATUSES.flatMap((from) =>
  TOOL_CALL_STATUSES.filter((to) => !legalKeys.has(key(from, to))).map((to) => [from, to] as [ToolCallStatus, ToolCallStatus]),
);

describe('tool call lifecycle', () => {
  it('declares a row for every status', () => {
    expect(Object.keys(TOOL_CALL_TRANSITIONS).sort()).toEqual([...TOOL_CALL_STATUSES].sort());
  });

  it('the table holds exactly the documented moves', () => {
    const declared = Object.entries(TOOL_CALL_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => key(from, to)));
    expect(new Set(declared)).toEqual(legalKeys);
  });

  it.each(LEGAL)('allows %s → %s', (from, to) => {
    expect(canTransition(from, to)).toBe(true);
    expect(() => assertTransition(from, to)).not.toThrow();
  });

  it.each(ILLEGAL)('refuses %s → %s', (from, to) => {
    expect(canTransition(from, to)).toBe(false);
    expect(() => assertTransition(from, to)).toThrow(IllegalTransitionError);
  });

  it('refuses the moves that would break the ledger', () => {
    for (const [from, to] of [
      ['succeeded', 'failed'],
      ['failed', 'running'],
      ['blocked', 'approved'],
      ['requested', 'approved'],
      ['requested', 'succeeded'],
      ['waiting_approval', 'running'],
      ['running', 'blocked'],
      ['indeterminate', 'running'],
      ['running', 'running'],
    ] as Array<[ToolCallStatus, ToolCallStatus]>) {
      expect(canTransition(from, to)).toBe(false);
    }
  });

  it('names both ends in the error', () => {
    try {
      assertTransition('succeeded', 'failed');
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(IllegalTransitionError);
      expect(error).toBeInstanceOf(Error);
      const e = error as IllegalTransitionError;
      expect(e.from).toBe('succeeded');
      expect(e.to).toBe('failed');
      expect(e.message).toContain('succeeded');
      expect(e.message).toContain('failed');
      expect(e.name).toBe('IllegalTransitionError');
    }
  });

  it('refuses statuses that do not exist, including prototype names', () => {
    expect(canTransition('bogus' as ToolCallStatus, 'running')).toBe(false);
    expect(canTransition('requested', 'toString' as ToolCallStatus)).toBe(false);
    expect(canTransition('__proto__' as ToolCallStatus, 'running')).toBe(false);
    expect(() => assertTransition('constructor' as ToolCallStatus, 'running')).toThrow(IllegalTransitionError);
    expect(isToolCallStatus('running')).toBe(true);
    expect(isToolCallStatus('toString')).toBe(false);
    expect(isToolCallStatus(3)).toBe(false);
  });

  it('knows which statuses are terminal', () => {
    const terminal = TOOL_CALL_STATUSES.filter(isTerminal);
    expect(terminal.sort()).toEqual(['blocked', 'failed', 'succeeded']);
    for (const s of terminal) expect(TOOL_CALL_TRANSITIONS[s]).toHaveLength(0);
  });

  it('treats indeterminate as settled but not terminal', () => {
    expect(TOOL_CALL_STATUSES.filter(isSettled).sort()).toEqual(['blocked', 'failed', 'indeterminate', 'succeeded']);
    expect(isTerminal('indeterminate')).toBe(false);
    expect(isSettled('running')).toBe(false);
    expect(isSettled('waiting_approval')).toBe(false);
    expect(isSettled('approved')).toBe(false);
    expect(isSettled('requested')).toBe(false);
  });
});
