import type { Response } from 'supertest';
import { expect } from 'vitest';

/**
 * What every answer to hostile input must be: not a 5xx, and when it is an
 * error without a ledger row, problem+json with a code (API.md §9), never a
 * stack trace.
 */
export function expectSane(res: Response, what = ''): void {
  const label = `${what.slice(0, 200)} → ${res.status} ${res.text?.slice(0, 300)}`;
  expect(res.status, label).toBeLessThan(500);
  expect(res.text ?? '', label).not.toMatch(/\bat [^\n]*\.(?:js|ts):\d+/);
  if (res.status >= 400) {
    const body = (res.body && typeof res.body === 'object' && Object.keys(res.body as object).length ? res.body : safeJson(res.text)) as Record<string, unknown> | undefined;
    if (body && 'toolCallId' in body) return; // a recorded outcome answers with the tool-call body
    expect(res.headers['content-type'], label).toMatch(/^application\/problem\+json/);
    expect(typeof body?.code, label).toBe('string');
  }
}

function safeJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}

/** Object.prototype is exactly as the runtime made it: no new keys, no polluted sentinel. */
export function expectPrototypeClean(): void {
  expect(Object.keys(Object.prototype)).toEqual([]);
  expect(Object.getOwnPropertyNames(Object.prototype).filter((k) => !PRISTINE.has(k))).toEqual([]);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(({} as Record<string, unknown>).action).toBeUndefined();
  expect(({} as Record<string, unknown>).toolName).toBeUndefined();
  expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
}

const PRISTINE = new Set(Object.getOwnPropertyNames(Object.prototype));
