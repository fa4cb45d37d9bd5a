/**
 * The vendor emulator speaks the vendors' real request/response shapes on
 * 127.0.0.1 so tests, the benchmark and the local demo exercise real HTTP.
 * One server hosts every vendor; each vendor module claims its paths:
 *   Shopify   POST /admin/api/{version}/graphql.json
 *   Amazon    POST /auth/o2/token (LWA), GET /orders/v0/orders/{id}[/orderItems]
 *   Jumio     POST /oauth2/token, GET /api/v1/accounts/{acc}/workflow-executions/{id}[/status]
 *   Nango     ANY  /proxy/{path}
 */
import type { VendorKey } from '../vendors/vendor-handler.js';

export interface EmuRequest {
  vendor?: VendorKey;
  method: string;
  /** pathname only, e.g. /admin/api/2026-07/graphql.json */
  path: string;
  query: URLSearchParams;
  /** lower-cased header names */
  headers: Record<string, string>;
  rawBody: Buffer;
  /** parsed JSON body when the body is JSON, else undefined */
  json?: unknown;
  /** parsed form body when application/x-www-form-urlencoded */
  form?: URLSearchParams;
}

export interface EmuResponse {
  status: number;
  headers?: Record<string, string>;
  /** objects are sent as JSON */
  body?: string | Buffer | object;
}

export interface EmulatedVendor {
  readonly vendor: VendorKey;
  handles(req: EmuRequest): boolean;
  handle(req: EmuRequest): EmuResponse | Promise<EmuResponse>;
  /** back to the seeded state: fixtures, issued tokens, counters */
  reset(): void;
}

/** A scripted fault, applied by the server before the vendor module sees the request. */
export interface FaultSpec {
  vendor?: VendorKey;
  /** matched against EmuRequest.path */
  path?: RegExp;
  method?: string;
  /** how many matching requests it applies to (default 1; Infinity for all) */
  times?: number;
  kind:
    | 'status' // answer `status` with `body`/`headers` (default body: the vendor's error shape for that status)
    | 'delay' // wait delayMs, then handle normally (a hung vendor when delayMs > the client timeout)
    | 'reset_before' // destroy the socket without applying the request
    | 'reset_after' // apply the request (the vendor module handles it), then destroy the socket instead of answering
    | 'delay_after' // apply the request, then wait delayMs before answering (answer lost if the client gave up)
    | 'malformed' // 200 with a body that is not valid JSON
    | 'huge' // 200 with a JSON body of `sizeBytes` (default 6 MB)
    | 'malformed_after' // apply the request, then answer the vendor's own status with its JSON body cut off mid-object
    | 'huge_after' // apply the request, then answer the vendor's own status with a JSON body of `sizeBytes` (default 6 MB)
    // An edge proxy answers `status` (default 504) at once while the vendor goes on
    // processing the request for `delayMs`, then applies it (that answer is lost).
    // Meanwhile a vendor that tracks requests in flight sees it as in progress
    // (Shopify: the same @idempotent key is "currently in progress").
    | 'status_then_apply'
    // answer `status` (as 'status' does, the request not applied), its body cut off halfway: then the connection
    // is closed (`status_cut`), or nothing more is sent until the client gives up (`status_stall`)
    | 'status_cut'
    | 'status_stall'
    | 'throttled'; // Shopify GraphQL: HTTP 200 with errors[].extensions.code = THROTTLED; Shopify's token endpoint and others: 429
  status?: number;
  body?: string | object;
  headers?: Record<string, string>;
  delayMs?: number;
  sizeBytes?: number;
}

export interface RecordedRequest {
  vendor?: VendorKey;
  method: string;
  path: string;
  /** the query string without '?', '' when there is none */
  query: string;
  headers: Record<string, string>;
  body: string;
  /** ms since epoch (fractional, from performance.timeOrigin + performance.now()) */
  receivedAt: number;
  /** when the answer was sent (or the socket destroyed) */
  finishedAt?: number;
  /** true when the vendor module applied the request (a side effect may have happened) */
  applied: boolean;
}
