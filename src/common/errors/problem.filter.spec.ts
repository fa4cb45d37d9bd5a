import { HttpException } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { ERROR_STATUS } from './error-codes.js';
import { toAppError } from './problem.filter.js';

describe('toAppError', () => {
  it('a client error a framework or middleware raised stays a client error: its own code when it has one, else 400, never a 500', () => {
    const of = (status: number) => {
      const e = toAppError(new HttpException('x', status));
      return [e.code, ERROR_STATUS[e.code]];
    };
    expect(of(412)).toEqual(['PRECONDITION_FAILED', 412]);
    expect(of(404)).toEqual(['NOT_FOUND', 404]);
    expect(of(416)).toEqual(['BAD_REQUEST', 400]);
    expect(of(405)).toEqual(['BAD_REQUEST', 400]);
    expect(of(500)).toEqual(['INTERNAL', 500]);
    expect(of(502)).toEqual(['INTERNAL', 500]);
    expect(toAppError(new Error('boom')).code).toBe('INTERNAL');
  });
});
