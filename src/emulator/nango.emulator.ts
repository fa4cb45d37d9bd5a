/**
 * Emulated Nango proxy (VENDORS.md §4): Nango's own checks and error shapes
 * (`{"error":{"code"}}`) in front of a fake upstream provider that echoes GETs
 * and stores POSTs. It records whether a `Retries` header arrived, since the
 * gateway must never delegate retries (of writes above all) to Nango. The
 * provider sees only the headers real Nango forwards (`Nango-Proxy-<Name>`,
 * prefix stripped), so a header meant for it but sent unprefixed never arrives.
 */
import { randomUUID } from 'node:crypto';
import type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec } from './emulator.types.js';
import type { FaultResponder } from './vendor-emulator.js';

export const NANGO_EMULATOR_CREDENTIALS = {
  secretKey: '1b4f3c2a-8d7e-4f6a-9b0c-2d3e4f5a6b7c',
  connectionId: 'conn-emulator-0001',
  providerConfigKey: 'emulator-crm',
} as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface NangoStoredPost {
  id: string;
  path: string;
  body: unknown;
}

/** One request as the provider behind the connection received it. */
export interface NangoUpstreamRequest {
  method: string;
  path: string;
  /** lower-cased names, only what Nango forwards */
  headers: Record<string, string>;
}

const PROXY_PREFIX = 'nango-proxy-';

/**
 * The headers Nango hands on upstream (allProxy.ts parseHeaders): those sent
 * as `Nango-Proxy-<Name>`, as `<Name>`, and Content-Type. Its own (Authorization,
 * Connection-Id, Provider-Config-Key, ...) stay with Nango, which adds the
 * connection's credentials for the provider itself.
 */
function forwardedHeaders(h: Record<string, string>): Record<string, string> {
  const forwarded = Object.entries(h)
    .filter(([name]) => name.startsWith(PROXY_PREFIX) && name.length > PROXY_PREFIX.length)
    .map(([name, value]) => [name.slice(PROXY_PREFIX.length), value]);
  if (h['content-type'] !== undefined) forwarded.push(['content-type', h['content-type']]);
  return Object.fromEntries(forwarded) as Record<string, string>;
}

function nangoError(status: number, code: string, message?: string, extra: Record<string, unknown> = {}): EmuResponse {
  return { status, body: { error: { code, ...(message ? { message } : {}), ...extra } } };
}

export class NangoEmulator implements EmulatedVendor, FaultResponder {
  readonly vendor = 'nango' as const;
  /** POSTs the upstream applied, in order. */
  readonly posts: NangoStoredPost[] = [];
  /** Values of every `Retries` header received (should stay empty). */
  readonly retriesHeaders: string[] = [];
  /** What reached the provider, in order. */
  readonly upstreamRequests: NangoUpstreamRequest[] = [];
  /**
   * Which Nango release's codes its own errors use (back to 'legacy' on reset). 'legacy' (VENDORS.md §4.2):
   * 404 `unknown_provider_config`, 400 `server_error` "Failed to get connection", `server_error` "Failed to get
   * connection credentials: '<reason>'". 'current' (proxy.service.ts ProxyServiceErrorCode): 404
   * `unknown_integration`, 400 `connection_not_found`, `credentials_refresh_failed` with the same messages.
   */
  errorCodes: 'legacy' | 'current' = 'legacy';
  /** The status the connection's token refresh fails with (failTokenRefresh), if it does. */
  private refreshFailureStatus: number | undefined;

  get appliedPosts(): number {
    return this.posts.length;
  }

  handles(req: EmuRequest): boolean {
    return req.path === '/proxy' || req.path.startsWith('/proxy/');
  }

  reset(): void {
    this.posts.length = 0;
    this.retriesHeaders.length = 0;
    this.upstreamRequests.length = 0;
    this.errorCodes = 'legacy';
    this.refreshFailureStatus = undefined;
  }

  /**
   * From now until reset (or `undefined`), refreshing the connection's token fails: Nango answers at the
   * refresh's status (4xx or 5xx) before anything reaches the provider (VENDORS.md §4.2, §4.5).
   */
  failTokenRefresh(status: number | undefined): void {
    this.refreshFailureStatus = status;
  }

  faultResponse(fault: FaultSpec): EmuResponse | undefined {
    const status = fault.kind === 'throttled' ? 429 : (fault.status ?? 500);
    if (status === 429) {
      const e = nangoError(429, 'too_many_request', 'Too many requests');
      return { ...e, headers: { 'retry-after': '2', 'x-ratelimit-limit': '200', 'x-ratelimit-remaining': '0' } };
    }
    // Unreachable/failed upstream, as proxy.service.ts reports it.
    if (status >= 500) return { status, body: { message: 'socket hang up', code: 'ECONNRESET', method: 'get' } };
    return undefined;
  }

  handle(req: EmuRequest): EmuResponse {
    const h = req.headers;
    if (h.retries !== undefined) this.retriesHeaders.push(h.retries);
    const auth = h.authorization;
    if (!auth) return nangoError(401, 'missing_auth_header', 'Authentication failed. The request is missing the Authorization header.');
    if (!auth.startsWith('Bearer ')) return nangoError(401, 'malformed_auth_header', 'Authentication failed. The provided Authorization header is malformed.');
    const key = auth.slice(7).trim();
    if (!UUID.test(key)) return nangoError(401, 'invalid_secret_key_format', 'Authentication failed. The provided secret key is not a UUID v4.');
    if (key !== NANGO_EMULATOR_CREDENTIALS.secretKey) return nangoError(401, 'unknown_account', 'The provided secret key is invalid.');

    const missing: { code: string; message: string; path: string[] }[] = [];
    if (!h['provider-config-key']) missing.push({ code: 'invalid_type', message: 'Required', path: ['provider-config-key'] });
    if (!h['connection-id']) missing.push({ code: 'invalid_type', message: 'Required', path: ['connection-id'] });
    if (h.retries !== undefined && !/^\d+$/.test(h.retries)) missing.push({ code: 'invalid_string', message: 'Invalid', path: ['retries'] });
    if (missing.length > 0) return nangoError(400, 'invalid_headers', undefined, { errors: missing });
    if (h['base-url-override'] !== undefined) return nangoError(400, 'base_url_override_not_allowed', 'Base URL override is not allowed');
    const current = this.errorCodes === 'current';
    if (h['provider-config-key'] !== NANGO_EMULATOR_CREDENTIALS.providerConfigKey) {
      return current
        ? nangoError(404, 'unknown_integration', 'Provider config not found for the given provider config key. Please make sure the provider config exists in the Nango dashboard.')
        : nangoError(404, 'unknown_provider_config', 'Provider config not found');
    }
    if (h['connection-id'] !== NANGO_EMULATOR_CREDENTIALS.connectionId) return nangoError(400, current ? 'connection_not_found' : 'server_error', 'Failed to get connection');
    if (this.refreshFailureStatus !== undefined) {
      const message = "Failed to get connection credentials: 'The external API returned an error when trying to refresh the access token. Please try again later.'";
      return nangoError(this.refreshFailureStatus, current ? 'credentials_refresh_failed' : 'server_error', message);
    }
    return this.upstream(req, h['connection-id']);
  }

  /**
   * The fake provider behind the connection: it knows the connection by the
   * credentials Nango attached for it, and sees no header of Nango's.
   */
  private upstream(req: EmuRequest, connectionId: string): EmuResponse {
    const path = req.path.slice('/proxy'.length) || '/';
    this.upstreamRequests.push({ method: req.method, path, headers: forwardedHeaders(req.headers) });
    if (path.startsWith('/missing/')) return { status: 404, body: { message: 'Not Found' } };
    if (req.method === 'GET') {
      return {
        status: 200,
        body: { path, query: Object.fromEntries(req.query), connectionId },
      };
    }
    if (req.method === 'POST') {
      const stored: NangoStoredPost = { id: randomUUID(), path, body: req.json ?? null };
      this.posts.push(stored);
      return { status: 201, body: { id: stored.id, received: stored.body } };
    }
    return { status: 405, body: { message: 'Method Not Allowed' } };
  }
}
