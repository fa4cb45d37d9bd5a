import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESULT_BYTES_PER_TOKEN } from '../../src/auth/key-rate-limiter.js';
import { setupNangoOrg } from '../executor/support.js';
import { emulatorEnv, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, startTestApp } from '../support/test-app.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * GET /v1/tool-calls/:id/result refused 429 RATE_LIMITED for the size of its result (retry review): the guard spent the
 * request's own token, which its retry spends again. Its Retry-After counted only the size's tokens, so a client that
 * waited exactly that long was refused again, and at RATE_LIMIT_RPS=1 every time (RateLimiter.takeMore).
 */
describe('Retry-After of a result read refused for its size', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('waiting Retry-After and sending the same GET again is answered (not 429 again and again)', async () => {
    // A result of 1-2 tokens' worth (64-128 KiB stored).
    h.emu.fault({ vendor: 'nango', kind: 'status', status: 200, body: { items: Array.from({ length: 2_500 }, (_, i) => ({ id: i, name: `item-${i}`, qty: i % 7 })) } });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path: 'v1/items' }));
    expect(res.body.status).toBe('succeeded');
    const id = res.body.toolCallId as string;
    const [{ n }] = (await h.t.ds.query('SELECT octet_length(ciphertext) AS n FROM tool_call_results WHERE tool_call_id = $1', [id])) as { n: number }[];
    expect(Math.floor(n / RESULT_BYTES_PER_TOKEN)).toBeGreaterThanOrEqual(1);

    await h.t.close();
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), RATE_LIMIT_RPS: '1' }); // burst 2
    await sleep(2_100); // full bucket

    const get = () => h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect((await get()).status).toBe(200); // full bucket: passes
    const statuses: number[] = [];
    let r = await get();
    statuses.push(r.status);
    // A literal client: wait what Retry-After says, send it again; at most 4 times.
    for (let i = 0; i < 4 && r.status === 429; i++) {
      const wait = Number(r.headers['retry-after']);
      expect(wait).toBe(r.body.retryAfterSeconds);
      await sleep(wait * 1000);
      r = await get();
      statuses.push(r.status);
    }
    // After honouring Retry-After, the read is answered (at most the first, early, request is refused).
    expect(statuses, JSON.stringify(statuses)).toContain(200);
    expect(statuses.filter((s) => s === 429).length).toBeLessThanOrEqual(2);
  }, 60_000);
});
