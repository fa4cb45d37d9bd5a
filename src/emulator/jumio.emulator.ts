/**
 * Emulated Jumio KYX auth + retrieval (VENDORS.md §3): Basic-auth token
 * endpoint, bearer-checked retrieval, 403 without a User-Agent or without
 * Accept: application/json (the token endpoint: without that Accept), and a PROCESSED execution whose details carry
 * full extraction PII so tests can prove the handler never passes it on. Executions are filed per account, as Jumio
 * KYX keeps one account per end user (VENDORS.md §3.2): one asked for under any other account is a 404.
 */
import { randomBytes } from 'node:crypto';
import type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec } from './emulator.types.js';
import type { FaultResponder } from './vendor-emulator.js';
import { recordMintedSecret } from './minted-secrets.js';

export const JUMIO_EMULATOR_CREDENTIALS = {
  clientId: 'jumio-emulator-client',
  clientSecret: 'JumioEmuSecret7qR2vX9mB4nL8pW3tY',
  accountId: 'f3b1c2d4-5e6f-4a70-8b9c-0d1e2f3a4b5c',
} as const;

/**
 * The tenant's end-user accounts: `primary` is the one the emulator credentials name as the org's default, `second`
 * another end user's, whose executions only a call naming its account can read.
 */
export const JUMIO_ACCOUNT_IDS = {
  primary: JUMIO_EMULATOR_CREDENTIALS.accountId,
  second: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
} as const;

/** `processed`, `initiated` and `unknown` belong to (or are missing from) the primary account, `secondProcessed` to the second. */
export const JUMIO_EXECUTION_IDS = {
  processed: 'a1b2c3d4-0000-4c5d-8e9f-000000000003',
  initiated: 'a1b2c3d4-0000-4c5d-8e9f-000000000001',
  unknown: 'a1b2c3d4-0000-4c5d-8e9f-0000000000ff',
  secondProcessed: 'b2c3d4e5-0000-4c5d-8e9f-000000000004',
} as const;

/** PII planted in the PROCESSED details; must never appear in a handler result. */
export const JUMIO_FIXTURE_PII = {
  firstName: 'AIKO',
  lastName: 'TANAKA',
  dateOfBirth: '1991-11-03',
  documentNumber: 'XK4471902',
  addressLine1: '3-12-7 Fictional-cho',
  imageHref: 'https://retrieval.amer-1.jumio.ai/api/v1/accounts/x/credentials/y/parts/FRONT',
} as const;

const API_PATH = /^\/api\/v1\/accounts\/([^/]+)\/workflow-executions\/([^/]+)(\/status)?$/;

function problem(status: number, title: string, detail: string): EmuResponse {
  return { status, body: { title, status, detail } };
}

function acceptsJson(req: EmuRequest): boolean {
  return (req.headers.accept ?? '').toLowerCase().includes('application/json');
}

/** Where the emulator files an execution: Jumio finds one only under its own account. */
const executionKey = (accountId: string, id: string): string => `${accountId}/${id}`;

function processedDetails(accountId: string, id: string): Record<string, unknown> {
  const acc = accountId;
  const pii = JUMIO_FIXTURE_PII;
  const passed = (label = 'OK') => ({ type: 'PASSED', details: { label } });
  return {
    workflow: { id, status: 'PROCESSED', definitionKey: '10013', customerInternalReference: 'emulator-ref-1' },
    account: { id: acc },
    createdAt: '2026-08-04T11:00:02.000Z',
    startedAt: '2026-08-04T11:00:05.000Z',
    completedAt: '2026-08-04T11:03:41.000Z',
    credentials: [{ id: 'c0000000-0000-4000-8000-000000000001', category: 'ID', parts: [{ classifier: 'FRONT', href: pii.imageHref }] }],
    decision: { type: 'WARNING', details: { label: 'WARNING' }, risk: { score: 50 } },
    capabilities: {
      usability: [{ id: 'u1', decision: passed() }],
      similarity: [{ id: 's1', decision: { type: 'WARNING', details: { label: 'NOT_POSSIBLE' } } }],
      liveness: [{ id: 'l1', decision: passed() }],
      extraction: [
        {
          id: 'e1',
          decision: passed(),
          data: {
            type: 'ID_CARD',
            issuingCountry: 'JPN',
            firstName: pii.firstName,
            lastName: pii.lastName,
            dateOfBirth: pii.dateOfBirth,
            documentNumber: pii.documentNumber,
            address: { line1: pii.addressLine1, city: 'Tokyo', postalCode: '100-0001', country: 'JPN' },
          },
        },
      ],
      dataChecks: [{ id: 'd1', decision: passed() }],
    },
  };
}

export class JumioEmulator implements EmulatedVendor, FaultResponder {
  readonly vendor = 'jumio' as const;
  tokenRequests = 0;
  private tokenLifetimeSec = 3600;
  private readonly tokens = new Map<string, { expiresAt: number; expired: boolean }>();
  /** Execution status by executionKey(account, id). */
  private readonly statuses = new Map<string, string>();

  constructor() {
    this.reset();
  }

  handles(req: EmuRequest): boolean {
    return req.path === '/oauth2/token' || req.path.startsWith('/api/v1/accounts/');
  }

  handle(req: EmuRequest): EmuResponse {
    return req.path === '/oauth2/token' ? this.token(req) : this.retrieval(req);
  }

  reset(): void {
    this.tokenRequests = 0;
    this.tokenLifetimeSec = 3600;
    this.tokens.clear();
    this.statuses.clear();
    this.statuses.set(executionKey(JUMIO_ACCOUNT_IDS.primary, JUMIO_EXECUTION_IDS.processed), 'PROCESSED');
    this.statuses.set(executionKey(JUMIO_ACCOUNT_IDS.primary, JUMIO_EXECUTION_IDS.initiated), 'INITIATED');
    this.statuses.set(executionKey(JUMIO_ACCOUNT_IDS.second, JUMIO_EXECUTION_IDS.secondProcessed), 'PROCESSED');
  }

  setTokenLifetime(sec: number): void {
    this.tokenLifetimeSec = sec;
  }

  expireAllTokens(): void {
    for (const t of this.tokens.values()) t.expired = true;
  }

  faultResponse(fault: FaultSpec, req: EmuRequest): EmuResponse | undefined {
    const status = fault.kind === 'throttled' ? 429 : (fault.status ?? 500);
    if (req.path === '/oauth2/token') return { status, body: { error: status === 429 ? 'rate_limited' : 'server_error' } };
    if (status === 429) return problem(429, 'Too Many Requests', 'Request limit exceeded');
    if (status === 404) return problem(404, 'Not Found', 'Resource not found');
    if (status === 403) return problem(403, 'Forbidden', 'Access denied');
    if (status === 401) return problem(401, 'Unauthorized', 'Invalid or expired token');
    return status >= 500 ? problem(status, 'Internal Server Error', 'An unexpected error occurred') : undefined;
  }

  private token(req: EmuRequest): EmuResponse {
    this.tokenRequests += 1;
    if (req.method !== 'POST') return { status: 405, body: { error: 'invalid_request' } };
    // The token call lists Accept: application/json too, and Jumio answers a missing header 403 (VENDORS.md §3.1).
    if (!acceptsJson(req)) return problem(403, 'Forbidden', 'Accept: application/json is required');
    const c = JUMIO_EMULATOR_CREDENTIALS;
    const expected = `Basic ${Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64')}`;
    if (req.headers.authorization !== expected) return { status: 401, body: { error: 'invalid_client' } };
    if (req.form?.get('grant_type') !== 'client_credentials') return { status: 400, body: { error: 'unsupported_grant_type' } };
    // Shaped like a JWT; the content is opaque to clients anyway.
    const token = `eyJhbGciOiJSUzI1NiJ9.${randomBytes(24).toString('base64url')}.${randomBytes(16).toString('base64url')}`;
    this.tokens.set(token, { expiresAt: Date.now() + this.tokenLifetimeSec * 1000, expired: false });
    recordMintedSecret('Jumio access token (emulator)', token);
    return { status: 200, body: { access_token: token, expires_in: this.tokenLifetimeSec, token_type: 'Bearer' } };
  }

  private retrieval(req: EmuRequest): EmuResponse {
    // Jumio: missing or "suspicious" headers → 403 (VENDORS.md §3.1).
    if (!req.headers['user-agent']) return problem(403, 'Forbidden', 'User-Agent header is required');
    if (!acceptsJson(req)) return problem(403, 'Forbidden', 'Accept: application/json is required');
    const auth = req.headers.authorization ?? '';
    const issued = auth.startsWith('Bearer ') ? this.tokens.get(auth.slice(7)) : undefined;
    if (!issued || issued.expired || Date.now() >= issued.expiresAt) return problem(401, 'Unauthorized', 'Invalid or expired token');
    const m = API_PATH.exec(req.path);
    if (req.method !== 'GET' || !m) return problem(404, 'Not Found', 'Resource not found');
    const [, accountId, id, isStatus] = m;
    // An execution asked for under an account other than its own is not found, as at Jumio (VENDORS.md §3.3).
    const status = this.statuses.get(executionKey(accountId, id));
    if (!status) return problem(404, 'Not Found', 'Resource not found');
    const base = `https://retrieval.amer-1.jumio.ai/api/v1/accounts/${accountId}/workflow-executions/${id}`;
    if (isStatus) {
      return {
        status: 200,
        body: { account: { id: accountId }, workflowExecution: { id, href: base, definitionKey: '10013', status } },
      };
    }
    if (status !== 'PROCESSED') {
      return { status: 200, body: { workflow: { id, status, definitionKey: '10013' }, account: { id: accountId }, createdAt: '2026-08-04T11:00:02.000Z' } };
    }
    return { status: 200, body: processedDetails(accountId, id) };
  }
}
