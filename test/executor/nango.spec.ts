import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { HOSTILE_NANGO_PATHS, SAFE_NANGO_PATHS } from '../../src/vendors/nango/nango-path.cases.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, setupNangoOrg } from './support.js';

/**
 * The agent supplies only a relative path and params; the gateway builds the
 * host, Connection-Id and Provider-Config-Key. Anything that could steer the
 * credentialed request elsewhere is refused before a connection is opened.
 */
describe('Nango proxy: hostile input through the pipeline', () => {
  let h: Harness;
  let org: OrgSetup;
  let nango: NangoEmulator;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
    nango = h.emu.vendor<NangoEmulator>('nango');
  });
  afterAll(async () => {
    await h?.close();
  });

  const nangoRequests = () => h.emu.count({ vendor: 'nango' }) + h.emu.requests.filter((r) => r.vendor === undefined).length;

  it('has the full hostile table (25+ paths)', () => {
    expect(HOSTILE_NANGO_PATHS.length).toBeGreaterThanOrEqual(25);
  });

  it.each(HOSTILE_NANGO_PATHS)('%s → 422 INVALID_INPUT naming `path`, for get and post, with no request at the emulator', async (_label, path) => {
    const before = nangoRequests();
    const posts = nango.appliedPosts;
    for (const input of [{ action: 'get', path }, { action: 'post', path, body: { amount: 1 } }]) {
      const res = await call(h, org, 'nango_proxy', input);
      expect(res.status, input.action).toBe(422);
      expect(res.body, input.action).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT', toolResult: { is_error: true } });
      expect(res.body.toolResult.content).toMatch(/path/);
      expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'failed', error_code: 'INVALID_INPUT', cost_cents: 0, started_at: null });
    }
    expect(nangoRequests()).toBe(before);
    expect(nango.appliedPosts).toBe(posts);
  });

  it.each([
    ['get', { path: 'v1/x', query: { 'Base-Url-Override': 'http://evil.example' } }],
    ['get', { path: 'v1/x', query: { baseUrlOverride: 'http://evil.example' } }],
    ['get', { path: 'v1/x', query: { 'Connection-Id': 'someone-else' } }],
    ['get', { path: 'v1/x', query: { 'Provider-Config-Key': 'other-integration' } }],
    ['get', { path: 'v1/x', query: { 'Nango-Proxy-Authorization': 'Bearer x' } }],
    ['get', { path: 'v1/x', query: { Retries: 5 } }],
    ['get', { path: 'v1/x', baseUrlOverride: 'http://evil.example' }],
    ['get', { path: 'v1/x', 'Connection-Id': 'someone-else' }],
    ['get', { path: 'v1/x', headers: { 'Base-Url-Override': 'http://evil.example' } }],
    ['post', { path: 'v1/x', body: {}, Retries: 3 }],
    ['post', { path: 'v1/x', body: {}, 'Retry-On': '500' }],
    ['post', { path: 'v1/x', body: {}, connectionId: 'someone-else' }],
    ['post', { path: 'v1/x', body: {}, query: { 'Base-Url-Override': 'http://evil.example' } }],
  ] as const)('params trying to set a base URL override or a Nango header → 422: %s %j', async (action, params) => {
    const before = nangoRequests();
    const res = await call(h, org, 'nango_proxy', { action, ...params });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
    expect(nangoRequests()).toBe(before);
  });

  it('ordinary paths still reach the provider, on the Nango host, with the org’s connection', async () => {
    for (const path of SAFE_NANGO_PATHS) {
      const before = h.emu.requests.length;
      const res = await call(h, org, 'nango_proxy', { action: 'get', path });
      expect(res.body.status, path).toBe('succeeded');
      const sent = h.emu.requests.slice(before);
      expect(sent, path).toHaveLength(1);
      expect(sent[0].path.startsWith('/proxy/'), path).toBe(true);
      expect(sent[0].headers['connection-id']).toBe('conn-emulator-0001');
      expect(sent[0].headers['base-url-override']).toBeUndefined();
    }
  });

  it('a body that mentions Nango headers is just data, and no write ever carries a Retries header', async () => {
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { Retries: 3, 'Base-Url-Override': 'http://evil.example' } });
    expect(res.body.status).toBe('succeeded');
    const posts = h.emu.requests.filter((r) => r.vendor === 'nango' && r.method === 'POST');
    expect(posts.length).toBeGreaterThan(0);
    for (const r of posts) {
      expect(r.headers.retries).toBeUndefined();
      expect(r.headers['retry-on']).toBeUndefined();
      expect(r.headers['base-url-override']).toBeUndefined();
    }
    expect(nango.retriesHeaders).toEqual([]);
  });
});
