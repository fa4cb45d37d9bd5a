/**
 * An org's credentials DELETEd (an offboarding, a suspected leak) left the vendor access token they bought in the
 * process's shared TokenCache (VendorRegistry → src/vendors/auth/token-cache.ts) for the life of the process: nothing
 * removed it (found by a reviewer of data lifecycle). A delete or a replacing PUT now drops the tokens bought with the
 * org's credentials of that integration in the replica that answered it (CredentialsService.onChange).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { VendorRegistry } from '../../src/vendors/vendor-registry.js';
import { CREDENTIALS, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

describe('credentials DELETE and the in-process access-token cache', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The token cache the vendor handlers share (one per process). */
  const cachedTokens = (): string[] => {
    const reg = h.t.app.get(VendorRegistry) as unknown as { handlers: Map<string, { tokens: { entries: Map<string, { token: string }> } }> };
    return [...reg.handlers.get('amazon')!.tokens.entries.values()].map((e) => e.token);
  };

  it('the LWA access token bought with deleted credentials is not kept in memory after the 204', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    const res = await h.t.http
      .post(`/v1/runs/${runId}/tool-calls`)
      .set(bearer(agentKey))
      .send(toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }));
    expect(res.body.status).toBe('succeeded');
    const bought = cachedTokens();
    expect(bought.length, 'the call bought and cached an access token').toBe(1);

    const del = await h.t.http.delete(`/v1/orgs/${orgId}/integrations/amazon/credentials`).set(adminAuth);
    expect(del.status).toBe(204);
    expect(cachedTokens(), 'the deleted credentials\' bearer token is still held in the process').not.toContain(bought[0]);
  });

  it('a PUT replacing the credentials drops the token the old ones bought too', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    const call = () => h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }));
    const before = cachedTokens();
    expect((await call()).body.status).toBe('succeeded');
    const bought = cachedTokens().filter((t) => !before.includes(t));
    expect(bought).toHaveLength(1);
    const put = await h.t.http.put(`/v1/orgs/${orgId}/integrations/amazon/credentials`).set(adminAuth).send({ config: CREDENTIALS.amazon });
    expect(put.status).toBe(200);
    expect(cachedTokens()).not.toContain(bought[0]);
    expect((await call()).body.status).toBe('succeeded'); // and the next call buys one with the credentials stored now
  });

  it('a call that loaded the credentials before the DELETE and asks for its token after the 204 buys none, keeps none and sends nothing', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    const creds = h.t.app.get(CredentialsService);
    const original = creds.loadStamped.bind(creds);
    let reached!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let armed = true;
    // Only timing: the call's credential read completes (the config as it was), then waits until the DELETE has answered.
    (creds as unknown as { loadStamped: typeof creds.loadStamped }).loadStamped = async (o, type, fresh) => {
      const v = await original(o, type, fresh);
      if (armed && o === orgId && type === 'amazon') {
        armed = false;
        reached();
        await gate;
      }
      return v;
    };
    try {
      const before = cachedTokens();
      const pending = h.t.http
        .post(`/v1/runs/${runId}/tool-calls`)
        .set(bearer(agentKey))
        .send(toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }))
        .then((r) => r);
      await reachedP;
      expect((await h.t.http.delete(`/v1/orgs/${orgId}/integrations/amazon/credentials`).set(adminAuth)).status).toBe(204);
      const sentFrom = h.emu.requests.length;
      release();
      const res = await pending;
      expect(cachedTokens().filter((t) => !before.includes(t)), 'a token bought with the deleted credentials is held').toEqual([]);
      // Not a token request, not the call: nothing leaves with credentials the admin took away.
      expect(h.emu.requests.slice(sentFrom).map((r) => `${r.method} ${r.path}`)).toEqual([]);
      // What a call started a moment later is told, as a refund that waited through a DELETE: not EXECUTION_ERROR
      // ("the gateway's own trouble, it may work later").
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND' });
      const [row] = (await h.t.ds.query('SELECT error_text FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { error_text: string }[];
      expect(row.error_text).toMatch(/credentials were deleted while this call was under way; nothing was sent with them/);
    } finally {
      (creds as unknown as { loadStamped: unknown }).loadStamped = original;
    }
  });
});
