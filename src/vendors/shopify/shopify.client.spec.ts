import { describe, expect, it } from 'vitest';
import { countsAgainstBreaker, errorCodeFor, isRetryable, refusedInput } from '../../executor/failure-mapping.js';
import type { VendorHttpResponse } from '../http/vendor-http.js';
import { interpretShopifyResponse } from './shopify.client.js';

const WRITE = { sideEffect: 'write' as const, overwrite: false };

const answer = (body: unknown, status = 200): VendorHttpResponse => {
  const buf = Buffer.from(JSON.stringify(body));
  return { status, headers: { 'content-type': 'application/json' }, body: buf, text: () => buf.toString(), json: () => JSON.parse(buf.toString()) as unknown };
};
const fieldError = { message: 'Internal error resolving field', path: ['refundCreate', 'refund', 'transactions'], extensions: { code: 'INTERNAL_SERVER_ERROR' } };
const refund = { id: 'gid://shopify/Refund/1', totalRefundedSet: { shopMoney: { amount: '1.00', currencyCode: 'EUR' } } };

describe('interpretShopifyResponse: top-level errors beside a mutation payload (VENDORS.md §1.4, data possibly partial)', () => {
  it('a mutation whose payload came back ran: the payload goes to the handler, whatever else errored', () => {
    const res = interpretShopifyResponse(answer({ data: { refundCreate: { refund, userErrors: [] } }, errors: [fieldError] }), 'refundCreate');
    expect(res).toEqual({ ok: true, data: { refundCreate: { refund, userErrors: [] } }, vendorStatus: 200 });
  });

  it('a mutation that did not run (no payload, or null) is still the failure the errors say', () => {
    for (const data of [null, {}, { refundCreate: null }]) {
      const res = interpretShopifyResponse(answer({ data, errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }] }), 'refundCreate');
      expect(res.ok, JSON.stringify(data)).toBe(false);
      if (!res.ok) expect(res.kind).toBe('rate_limited');
    }
  });

  it('a query with partial data and errors is not taken for a success (only a named mutation is)', () => {
    const res = interpretShopifyResponse(answer({ data: { order: { id: 'gid://shopify/Order/1' } }, errors: [fieldError] }));
    expect(res.ok).toBe(false);
    const other = interpretShopifyResponse(answer({ data: { orderUpdate: { order: {} } }, errors: [fieldError] }), 'refundCreate');
    expect(other.ok).toBe(false);
  });

  it('a refund whose own payload errored away (refund null, no userErrors) is an unusable 2xx: unknown, never failed', () => {
    const res = interpretShopifyResponse(answer({ data: { refundCreate: { refund: null, userErrors: [] } }, errors: [fieldError] }), 'refundCreate');
    expect(res.ok).toBe(true); // the handler then finds no refund: bad_response at 200 …
    expect(errorCodeFor({ ok: false, kind: 'bad_response', vendorStatus: 200, requestSent: true, message: 'm' }, WRITE)).toBe('OUTCOME_UNKNOWN'); // … which a write reports as unknown
  });
});

describe('interpretShopifyResponse: top-level errors with no payload for a mutation (VENDORS.md §1.4, §1.9)', () => {
  const NOTE = { sideEffect: 'write' as const, overwrite: true };
  const failed = (body: unknown, mutation?: string) => {
    const res = interpretShopifyResponse(answer(body), mutation);
    if (res.ok) throw new Error('expected a failure');
    return res;
  };

  it('an error raised by the mutation field itself (path [mutation], data null) may have taken effect → OUTCOME_UNKNOWN for any write', () => {
    for (const error of [
      { message: 'Timeout', locations: [{ line: 2, column: 3 }], path: ['refundCreate'] },
      { message: 'Something went wrong', path: ['refundCreate'], extensions: { code: 'SOME_NEW_CODE' } },
      { message: 'Cannot return null for non-nullable field', path: ['refundCreate', 'refund', 'id'], extensions: { code: 'INTERNAL_SERVER_ERROR' } },
    ]) {
      const f = failed({ data: { refundCreate: null }, errors: [error] }, 'refundCreate');
      expect(f, JSON.stringify(error)).toMatchObject({ kind: 'bad_response', vendorStatus: 200, requestSent: true });
      expect(f.message).toBe('shopify reported an error while running refundCreate: it may have taken effect');
      expect(errorCodeFor(f, WRITE)).toBe('OUTCOME_UNKNOWN');
      expect(errorCodeFor(f, NOTE)).toBe('OUTCOME_UNKNOWN');
    }
    expect(failed({ data: null, errors: [{ message: 'boom', path: ['orderUpdate'] }] }, 'orderUpdate').kind).toBe('bad_response');
  });

  it('errors positively from before execution (parse / validation, with `locations`; a refusal of the whole request) stay a definite refusal', () => {
    const f = failed({ errors: [{ message: "Argument 'input' has an invalid value", locations: [{ line: 2, column: 16 }], extensions: { code: 'argumentLiteralsIncompatible' } }] }, 'refundCreate');
    expect(f).toMatchObject({ kind: 'rejected', message: 'shopify refused the GraphQL request (argumentLiteralsIncompatible)' });
    expect(errorCodeFor(f, WRITE)).toBe('VENDOR_ERROR');
    expect(failed({ errors: [{ message: 'Parse error on "}" (RCURLY)', locations: [{ line: 1, column: 9 }] }] }, 'refundCreate').kind).toBe('rejected');
    for (const code of ['MAX_COST_EXCEEDED', 'SHOP_INACTIVE']) {
      expect(failed({ errors: [{ message: 'refused', extensions: { code } }] }, 'refundCreate').kind, code).toBe('rejected');
    }
    expect(failed({ errors: [{ message: 'Access denied', extensions: { code: 'ACCESS_DENIED' } }] }, 'refundCreate').kind).toBe('auth');
  });

  it("Shopify's validation errors (graphql-ruby: `locations` and a path into the document, from the operation) are a refusal: nothing ran", () => {
    const validation = (message: string, path: string[], code: string) => ({ message, locations: [{ line: 2, column: 32 }], path, extensions: { code } });
    for (const [mutation, error] of [
      // an API version before @idempotent (VENDORS.md §1.9)
      ['refundCreate', validation("Directive 'idempotent' is not defined", ['mutation Refund', 'refundCreate'], 'undefinedDirective')],
      // a selected field the served version lacks (after a fall-forward, VENDORS.md §1.1)
      ['refundCreate', validation("Field 'totalRefundedSet' doesn't exist on type 'Refund'", ['mutation Refund', 'refundCreate', 'refund', 'totalRefundedSet'], 'undefinedField')],
      ['orderUpdate', validation("Field 'orderUpdate' is missing required arguments: input", ['mutation OrderNote', 'orderUpdate'], 'missingRequiredArguments')],
      ['refundCreate', validation('Variable $input is declared by Refund but not used', ['mutation Refund'], 'variableNotUsed')],
    ] as const) {
      const f = failed({ errors: [error] }, mutation);
      expect(f, JSON.stringify(error)).toMatchObject({ kind: 'rejected', vendorStatus: 200, requestSent: true, message: `shopify refused the GraphQL request (${error.extensions.code})` });
      expect(errorCodeFor(f, WRITE)).toBe('VENDOR_ERROR');
    }
    // A path that starts neither at the mutation nor with `locations` pointing into the document places nothing.
    const unplaced = failed({ errors: [{ message: 'odd', path: ['mutation Refund', 'refundCreate'] }] }, 'refundCreate');
    expect(unplaced).toMatchObject({ kind: 'bad_response', mayStillRun: true });
  });

  it('a path-less error that is not positively from before execution (an execution "Timeout", an unknown code) may have taken effect → OUTCOME_UNKNOWN for a write', () => {
    for (const body of [
      { errors: [{ message: 'Timeout' }] },
      { data: { refundCreate: null }, errors: [{ message: 'Timeout' }] },
      { data: null, errors: [{ message: 'Something went wrong', extensions: { code: 'SOME_NEW_CODE' } }] },
      { data: { refundCreate: null }, errors: [{ message: 'The @idempotent directive with a key is required for this mutation.', extensions: { code: 'BAD_REQUEST' } }] },
      // one unplaced error among refusals is enough
      { errors: [{ message: 'bad', locations: [{ line: 1, column: 1 }], extensions: { code: 'undefinedField' } }, { message: 'Timeout' }] },
      { errors: [] },
      { errors: 'Internal error' },
    ]) {
      const f = failed(body, 'refundCreate');
      expect(f, JSON.stringify(body)).toMatchObject({ kind: 'bad_response', vendorStatus: 200, requestSent: true });
      expect(f.message).toBe('shopify answered refundCreate with an error that does not say whether it ran: it may have taken effect');
      expect(errorCodeFor(f, WRITE)).toBe('OUTCOME_UNKNOWN');
      expect(errorCodeFor(f, NOTE)).toBe('OUTCOME_UNKNOWN');
    }
    // Shopify's internal error is a 5xx in kind, with or without a path (a refund is then retried under its key).
    expect(failed({ errors: [{ message: 'Internal error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }, 'refundCreate').kind).toBe('server_error');
  });

  it('a read (no mutation) with an error not positively from before execution failed on Shopify\'s side: server_error, retried, not "refused"', () => {
    const READ = { sideEffect: 'read' as const, overwrite: false };
    for (const body of [
      { errors: [{ message: 'Timeout' }] },
      { data: null, errors: [{ message: 'Internal error. Looks like something went wrong on our end.' }] },
      { data: null, errors: [{ message: 'Something went wrong', extensions: { code: 'SOME_NEW_CODE' } }] },
      // a field error raised while the query ran: its path starts at a root field's response key, not at the operation
      { data: { order: null }, errors: [{ message: 'Timeout', locations: [{ line: 2, column: 3 }], path: ['order'] }] },
      { data: { order: null }, errors: [{ message: 'boom', locations: [{ line: 9, column: 5 }], path: ['order', 'fulfillments', 0, 'trackingInfo'] }] },
      // one unplaced error among refusals is enough
      { errors: [{ message: 'bad', locations: [{ line: 1, column: 1 }], extensions: { code: 'undefinedField' } }, { message: 'Timeout' }] },
      { errors: [] },
      { errors: 'Internal error' },
    ]) {
      const f = failed(body);
      expect(f, JSON.stringify(body)).toMatchObject({ kind: 'server_error', vendorStatus: 200, requestSent: true });
      expect(f.retryAfterMs).toBeUndefined();
      expect(isRetryable(f, { idempotent: true, sideEffect: 'read' }, 2_000), JSON.stringify(body)).toBe(true);
      expect(refusedInput(f)).toBe(false);
      expect(countsAgainstBreaker(f)).toBe(true);
      expect(errorCodeFor(f, READ)).toBe('VENDOR_ERROR');
    }
    expect(failed({ errors: [{ message: 'Timeout' }] }).message).toBe('shopify answered the query with an error not placed before its run, such as its execution "Timeout": a failure on its side');
    expect(failed({ errors: [{ message: 'odd', extensions: { code: 'SOME_NEW_CODE' } }] }).message).toMatch(/\(SOME_NEW_CODE\)/);
  });

  it('a read refused before it ran (parse / validation with `locations`, a variable, MAX_COST_EXCEEDED, SHOP_INACTIVE) stays rejected; ACCESS_DENIED auth; INTERNAL_SERVER_ERROR server_error', () => {
    for (const error of [
      { message: "Field 'foo' doesn't exist on type 'Order'", locations: [{ line: 3, column: 5 }], path: ['query OrderLookup', 'order', 'foo'], extensions: { code: 'undefinedField' } },
      { message: 'Parse error on "}" (RCURLY)', locations: [{ line: 1, column: 9 }] },
      { message: 'Variable $id of type ID! was provided invalid value', locations: [{ line: 1, column: 19 }], extensions: { code: 'INVALID_VARIABLE' } },
      { message: 'refused', extensions: { code: 'MAX_COST_EXCEEDED' } },
      { message: 'refused', extensions: { code: 'SHOP_INACTIVE' } },
    ]) {
      const f = failed({ errors: [error] });
      expect(f, JSON.stringify(error)).toMatchObject({ kind: 'rejected', vendorStatus: 200, requestSent: true });
      expect(refusedInput(f)).toBe(true);
      expect(isRetryable(f, { idempotent: true, sideEffect: 'read' }, 2_000)).toBe(false);
    }
    expect(failed({ data: { order: null }, errors: [{ message: 'Access denied', path: ['order'], extensions: { code: 'ACCESS_DENIED' } }] }).kind).toBe('auth');
    expect(failed({ errors: [{ message: 'Internal error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] })).toMatchObject({ kind: 'server_error', message: 'shopify GraphQL internal error' });
  });

  it('ACCESS_DENIED on the mutation is a refusal (auth); INTERNAL_SERVER_ERROR on it is a 5xx in kind (server_error)', () => {
    expect(failed({ data: { refundCreate: null }, errors: [{ message: 'Access denied', path: ['refundCreate'], extensions: { code: 'ACCESS_DENIED' } }] }, 'refundCreate').kind).toBe('auth');
    expect(failed({ data: { refundCreate: null }, errors: [{ message: 'Internal error', path: ['refundCreate'], extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }, 'refundCreate').kind).toBe('server_error');
  });

  it('the @idempotent codes: IDEMPOTENCY_CONCURRENT_REQUEST → in_progress (polled), IDEMPOTENCY_KEY_PARAMETER_MISMATCH → key_conflict (reconcile)', () => {
    const concurrent = failed({ data: { refundCreate: null }, errors: [{ message: 'in progress', path: ['refundCreate'], extensions: { code: 'IDEMPOTENCY_CONCURRENT_REQUEST' } }] }, 'refundCreate');
    expect(concurrent).toMatchObject({ kind: 'in_progress', vendorStatus: 200, requestSent: true, retryAfterMs: 1_000 });
    const mismatch = failed({ data: { refundCreate: null }, errors: [{ message: 'mismatch', extensions: { code: 'IDEMPOTENCY_KEY_PARAMETER_MISMATCH' } }] }, 'refundCreate');
    expect(mismatch).toMatchObject({ kind: 'key_conflict', vendorStatus: 200, requestSent: true });
    expect(errorCodeFor(mismatch, WRITE)).toBe('OUTCOME_UNKNOWN');
  });
});

describe('interpretShopifyResponse: HTTP status of graphql.json', () => {
  it('404 is the endpoint missing (unknown shop or API version), not "order not found": the credentials to fix, never VENDOR_NOT_FOUND', () => {
    const res = interpretShopifyResponse(answer({ errors: 'Not Found' }, 404));
    expect(res).toMatchObject({ ok: false, kind: 'auth', vendorStatus: 404 });
    if (!res.ok) expect(res.message).toMatch(/unknown shop or API version/);
  });
});
