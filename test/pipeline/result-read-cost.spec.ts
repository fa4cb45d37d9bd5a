import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESULT_BYTES_PER_TOKEN } from '../../src/auth/key-rate-limiter.js';
import { Clock } from '../../src/common/clock.js';
import { setupNangoOrg } from '../executor/support.js';
import { emulatorEnv, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, startTestApp } from '../support/test-app.js';

/**
 * A stored result read back in full (GET /v1/tool-calls/:id/result) costs the key a token per 64 KiB beyond the
 * first, taken before it is decrypted: one key within RATE_LIMIT_RPS could otherwise have the gateway decrypt,
 * parse and send a megabytes-large result many times a second, and every other org's calls wait behind it (a noisy
 * neighbour review measured another org's lookup at 10 s while one key read a 3 MB result 20 times a second).
 *
 * The key's bucket refills on the gateway's Clock (KeyRateLimiter), moved here with advance() instead of waiting.
 */

describe('reading a large result costs its size', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness(); // no rate limit while the org is set up
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  const uses = new Map<string, object>();
  async function storedCall(items: number): Promise<string> {
    h.emu.fault({ vendor: 'nango', kind: 'status', status: 200, body: { items: Array.from({ length: items }, (_, i) => ({ id: i, name: `item-${i}`, qty: i % 7 })) } });
    const use = toolUse('nango_proxy', { action: 'get', path: 'v1/items' });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(res.body, JSON.stringify(res.body).slice(0, 300)).toMatchObject({ status: 'succeeded' });
    uses.set(res.body.toolCallId as string, use);
    return res.body.toolCallId as string;
  }
  const replay = (id: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(uses.get(id)!);
  const bytesOf = async (id: string) =>
    ((await h.t.ds.query('SELECT octet_length(ciphertext) AS n FROM tool_call_results WHERE tool_call_id = $1', [id])) as { n: number }[])[0].n;

  it('a large result: the first read passes on a full bucket and leaves the key in debt; the next waits (429, Retry-After); small reads cost one', async () => {
    const large = await storedCall(16_000);
    const small = await storedCall(10);
    const cost = Math.floor((await bytesOf(large)) / RESULT_BYTES_PER_TOKEN);
    expect(cost).toBeGreaterThanOrEqual(8); // twice the burst: its debt takes seconds to pay back
    expect(await bytesOf(small)).toBeLessThan(RESULT_BYTES_PER_TOKEN);
    await h.t.close();
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), RATE_LIMIT_RPS: '2' }); // a burst of 4

    const clock = h.t.app.get(Clock);
    const full = async (ms = 2_100) => clock.advance(ms); // the key's bucket refilled: 4 tokens at 2 a second
    // A small result costs a request: four reads in a row pass on a full bucket.
    await full();
    for (let i = 0; i < 4; i++) expect((await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey))).status).toBe(200);
    // The large one passes on a full bucket, answered whole, and leaves the key owing what it cost beyond the burst.
    await full();
    const first = await h.t.http.get(`/v1/tool-calls/${large}/result`).set(bearer(org.agentKey));
    expect(first.status).toBe(200);
    expect((first.body.result as { items: unknown[] }).items).toHaveLength(16_000);
    // Right after it: refused before anything is read, with when to come back (a small read would have passed).
    const second = await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey));
    expect([second.status, second.body.code]).toEqual([429, 'RATE_LIMITED']);
    expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // A bucket with some tokens, but fewer than the large result costs: refused by its size, saying so.
    await full(((cost - 3 + 4) / 2) * 1000 + 500); // the debt paid back and the bucket full again
    expect((await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey))).status).toBe(200);
    expect((await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey))).status).toBe(200);
    const priced = await h.t.http.get(`/v1/tool-calls/${large}/result`).set(bearer(org.agentKey));
    expect([priced.status, priced.body.code]).toEqual([429, 'RATE_LIMITED']);
    expect(priced.body.detail).toMatch(/^rate limit exceeded for this API key \(a result of \d+ bytes costs \d+ requests\)$/);

    // A replay (the same tool_use posted again) shows the model at most the result budget, but the whole stored
    // result is read and decrypted for it: it costs the same, never refused for it (a batch, which spent a token per
    // item already, could otherwise never pay) but as debt. On a full bucket: answered, and the key owes the rest.
    await full(((cost - 3 + 4) / 2) * 1000 + 500);
    const replayed = await replay(large);
    expect([replayed.status, replayed.body.replayed, replayed.body.truncated]).toEqual([200, true, true]);
    const afterReplay = await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey));
    expect([afterReplay.status, afterReplay.body.code]).toEqual([429, 'RATE_LIMITED']);
    // With fewer tokens than it costs: still answered, and the key is in debt again: its next request waits.
    await full(((cost - 3 + 4) / 2) * 1000 + 500);
    expect((await replay(small)).status).toBe(200);
    expect((await replay(small)).status).toBe(200);
    const inDebt = await replay(large);
    expect([inDebt.status, inDebt.body.replayed]).toEqual([200, true]);
    const next = await h.t.http.get(`/v1/tool-calls/${small}/result`).set(bearer(org.agentKey));
    expect([next.status, next.body.code]).toEqual([429, 'RATE_LIMITED']);
    expect(Number(next.headers['retry-after'])).toBeGreaterThanOrEqual(Math.floor((cost - 4) / 2));

    // Concurrent replays of it sent alone: the first is answered (and leaves the key in debt), the others are refused
    // before anything is decrypted — not each decrypted on a token apiece.
    await full(((cost + 4) / 2) * 1000 + 500);
    const together = await Promise.all([replay(large), replay(large), replay(large)]);
    expect(together.map((r) => r.status).sort()).toEqual([200, 429, 429]);

    // A batch sent again with a large replay in it passes (before, every resend was refused for the batch's own tokens).
    await full(((cost + 4) / 2) * 1000 + 500);
    const batch = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [uses.get(large), uses.get(small)] });
    expect(batch.status).toBe(200);
    expect((batch.body.results as { status: string; replayed: boolean }[]).map((r) => [r.status, r.replayed])).toEqual([['succeeded', true], ['succeeded', true]]);

    // A result past its expiry (not purged yet) is not decrypted, and costs nothing more.
    await h.t.ds.query(`UPDATE tool_call_results SET expires_at = now() - interval '1 second' WHERE tool_call_id = $1`, [large]);
    await full(((cost + 4) / 2) * 1000 + 500);
    for (let i = 0; i < 3; i++) expect((await replay(large)).status).toBe(200);
    expect((await h.t.http.get(`/v1/tool-calls/${large}/result`).set(bearer(org.agentKey))).status).toBe(200);
    // Not left expired on the shared database for another spec's purge to count.
    await h.t.ds.query('DELETE FROM tool_call_results WHERE tool_call_id = $1', [large]);
  });

  // Retry review: the guard spent the request's own token, which its retry spends again, and the Retry-After of a read
  // refused for its size counted only the size's tokens. A client waiting exactly that long was refused again, and at
  // RATE_LIMIT_RPS=1 every time (RateLimiter.takeMore).
  it('waiting Retry-After and sending the same GET again is answered (not 429 again and again)', async () => {
    await h.t.close();
    h.t = await startTestApp(emulatorEnv(h.emu.url)); // whatever an earlier test left the key owing
    const id = await storedCall(2_500); // 1-2 tokens' worth (64-128 KiB stored)
    expect(Math.floor((await bytesOf(id)) / RESULT_BYTES_PER_TOKEN)).toBeGreaterThanOrEqual(1);
    await h.t.close();
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), RATE_LIMIT_RPS: '1' }); // burst 2
    const clock = h.t.app.get(Clock);
    clock.advance(2_100); // full bucket

    const get = () => h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect((await get()).status).toBe(200); // full bucket: passes
    const statuses: number[] = [];
    let r = await get();
    statuses.push(r.status);
    // A literal client: wait what Retry-After says, send it again; at most 4 times.
    for (let i = 0; i < 4 && r.status === 429; i++) {
      const wait = Number(r.headers['retry-after']);
      expect(wait).toBe(r.body.retryAfterSeconds);
      clock.advance(wait * 1000);
      r = await get();
      statuses.push(r.status);
    }
    // After honouring Retry-After, the read is answered (at most the first, early, request is refused).
    expect(statuses, JSON.stringify(statuses)).toContain(200);
    expect(statuses.filter((s) => s === 429).length).toBeLessThanOrEqual(2);
  });
});
