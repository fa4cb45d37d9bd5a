/**
 * HTTP_MAX_HEADER_BYTES: the request line and headers the gateway takes (Node's 16 KiB by default). Behind a load
 * balancer that passes more (AWS ALB: 64 KiB) a request with large headers was refused 431 here and nothing could
 * raise the limit short of a Node flag.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/test-app.js';

const urlOf = (t: TestApp): string => `http://127.0.0.1:${((t.app.getHttpServer() as Server).address() as AddressInfo).port}`;
const withHeader = (t: TestApp, bytes: number) => fetch(`${urlOf(t)}/healthz`, { headers: { 'X-Big': 'a'.repeat(bytes) } });

describe('HTTP_MAX_HEADER_BYTES', () => {
  let byDefault: TestApp;
  let raised: TestApp;
  beforeAll(async () => {
    byDefault = await startTestApp();
    raised = await startTestApp({ HTTP_MAX_HEADER_BYTES: '65536' });
  });
  afterAll(async () => {
    await byDefault?.close();
    await raised?.close();
  });

  it('by default (16 KiB): headers of 12 KiB are taken, 24 KiB answered 431 problem+json', async () => {
    expect((await withHeader(byDefault, 12 * 1024)).status).toBe(200);
    const refused = await withHeader(byDefault, 24 * 1024);
    expect(refused.status).toBe(431);
    expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(await refused.json()).toMatchObject({ status: 431, code: 'PAYLOAD_TOO_LARGE' });
  });

  it('raised to 64 KiB: 24 and 60 KiB are taken, 70 KiB is 431', async () => {
    expect((await withHeader(raised, 24 * 1024)).status).toBe(200);
    expect((await withHeader(raised, 60 * 1024)).status).toBe(200);
    expect((await withHeader(raised, 70 * 1024)).status).toBe(431);
  });
});
