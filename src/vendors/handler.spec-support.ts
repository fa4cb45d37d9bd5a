/**
 * What the vendor handler specs share: endpoints that send every vendor to
 * one emulator, a call context with neutral defaults, and `failure()` to
 * assert a handler answered with a failure. Test-only (not in the build).
 */
import type { VendorCallContext, VendorEndpoints, VendorOutcome } from './vendor-handler.js';

export type Failure = Extract<VendorOutcome, { ok: false }>;

export const TEST_USER_AGENT = 'ToolGateway/test (Language=Node/20)';

/** Every vendor's base URL at the emulator listening on `url`. */
export function emulatorEndpoints(url: string, overrides: Partial<VendorEndpoints> = {}): VendorEndpoints {
  return {
    shopifyBaseUrl: url,
    shopifyApiVersion: '2026-07',
    amazonLwaUrl: `${url}/auth/o2/token`,
    amazonSpapiBaseUrl: url,
    jumioAuthBaseUrl: url,
    jumioRetrievalBaseUrl: url,
    nangoHost: url,
    timeoutMs: 5_000,
    connectTimeoutMs: 2_000,
    maxResponseBytes: 1024 * 1024,
    userAgent: TEST_USER_AGENT,
    ...overrides,
  };
}

/** A first attempt of one call; name the tool, action, params and credentials, override anything else. */
export function callContext(c: Pick<VendorCallContext, 'toolName' | 'action' | 'params' | 'credentials'> & Partial<VendorCallContext>): VendorCallContext {
  return { orgId: 'org-1', toolCallId: 'call-1', idempotencyKey: 'key-1', signal: new AbortController().signal, attempt: 0, scratch: new Map(), ...c };
}

/** The failure a handler answered with; throws (failing the test) when it succeeded. */
export function failure(o: VendorOutcome): Failure {
  if (o.ok) throw new Error(`expected a failure, got ${JSON.stringify(o)}`);
  return o;
}
