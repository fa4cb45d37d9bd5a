/**
 * Shopify's error answers (VENDORS.md §1.4), used by the emulator for status
 * faults without a scripted body and for the THROTTLED fault. Edge 5xx answers
 * are HTML, not JSON: clients must treat them as transient, not crash parsing.
 */
import { STATUS_CODES } from 'node:http';
import type { EmuResponse } from './emulator.types.js';

const HTML = { 'content-type': 'text/html; charset=utf-8' };

export function shopifyStatusResponse(status: number): EmuResponse {
  switch (status) {
    case 401:
      return {
        status,
        headers: { 'www-authenticate': 'Basic Realm="Shopify API Authentication"' },
        body: { errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' },
      };
    case 402:
      return { status, body: { errors: 'Unavailable Shop' } };
    case 403:
      return { status, body: { errors: '[API] This action requires merchant approval for read_orders scope.' } };
    case 404:
      return { status, body: { errors: 'Not Found' } };
    case 423:
      return { status, body: { errors: 'Locked' } };
    case 429:
      // Retry-After is in seconds and fractional; Shopify's own JS client misreads it as ms (VENDORS.md §1.6).
      return {
        status,
        headers: { 'retry-after': '2.0' },
        body: { errors: 'Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service.' },
      };
    case 500:
      return { status, body: { errors: 'Internal Server Error' } };
    case 502:
    case 503:
    case 504:
      return { status, headers: HTML, body: `<!DOCTYPE html><html><body><h1>${status} ${STATUS_CODES[status] ?? ''}</h1></body></html>` };
    default:
      return { status, body: { errors: STATUS_CODES[status] ?? 'Error' } };
  }
}

/** GraphQL throttling arrives as HTTP 200 with a top-level THROTTLED error (VENDORS.md §0, §1.5). */
export function shopifyThrottledResponse(requestedQueryCost: number): EmuResponse {
  return {
    status: 200,
    body: {
      errors: [
        {
          message: 'Throttled',
          extensions: { code: 'THROTTLED', documentation: 'https://shopify.dev/api/usage/rate-limits' },
        },
      ],
      extensions: {
        cost: {
          requestedQueryCost,
          actualQueryCost: null,
          throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 0, restoreRate: 100 },
        },
      },
    },
  };
}
