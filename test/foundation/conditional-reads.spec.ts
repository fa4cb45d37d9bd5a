import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * If-None-Match on a GET. Only the policy and permission sets carry an ETag, and only they answer 304 (documented).
 * Express takes "*" as matching any answer, tagged or not: every other GET answered 304 with no body, undocumented,
 * and a cache in front of an agent that sends it got no toolResult. Found by a review of real answers against the
 * OpenAPI document.
 */
describe('If-None-Match on GET', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('"*" on a GET without a tag: 200 with the body, as without it', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const agent = bearer(org.agentKey);
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(agent).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body.status).toBe('succeeded');
    for (const [url, auth] of [
      [`/v1/tool-calls/${call.body.toolCallId}/result`, agent],
      [`/v1/runs/${org.runId}`, agent],
      ['/v1/tools', agent],
      [`/v1/tool-calls/${call.body.toolCallId}`, adminAuth],
      [`/v1/orgs/${org.orgId}/feature-flags`, adminAuth],
    ] as const) {
      const plain = await h.t.http.get(url).set(auth);
      const starred = await h.t.http.get(url).set(auth).set('If-None-Match', '*');
      expect([starred.status, starred.headers['etag']], url).toEqual([200, undefined]);
      expect(Object.keys(starred.body as object).sort(), url).toEqual(Object.keys(plain.body as object).sort());
    }
  });

  it('the policy set keeps its 304 for its own tag and for "*", and answers 200 to another tag', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const url = `/v1/orgs/${org.orgId}/policies`;
    const first = await h.t.http.get(url).set(adminAuth);
    const tag = first.headers['etag'] as string;
    expect(tag).toEqual(expect.any(String));
    expect((await h.t.http.get(url).set(adminAuth).set('If-None-Match', tag)).status).toBe(304);
    expect((await h.t.http.get(url).set(adminAuth).set('If-None-Match', '*')).status).toBe(304);
    expect((await h.t.http.get(url).set(adminAuth).set('If-None-Match', '"other"')).status).toBe(200);
  });
});
