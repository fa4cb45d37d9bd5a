/**
 * http_request_duration_seconds{route} is the route's template as documented (README, API.md, OpenAPI:
 * POST /v1/runs/:runId/tool-calls:batch), not Express's spelling of it with an escaped colon (`tool-calls\:batch`),
 * so a dashboard or alert written from the documented path selects the batch route.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

describe('the route label of the batch route', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is the documented path template, without an escape character', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [toolUse('order_lookup', { action: 'lookup', orderId: '12345' })] });
    expect(res.status).toBe(200);
    const routes = ((await h.t.http.get('/metrics')).text as string).split('\n')
      .filter((l) => l.startsWith('http_request_duration_seconds_count{method="POST"') && l.includes('batch'))
      .map((l) => /route="((?:[^"\\]|\\.)*)"/.exec(l)?.[1]);
    // exposition escapes a backslash as \\ : the label value itself is /v1/runs/:runId/tool-calls\:batch
    expect(routes).toEqual(['/v1/runs/:runId/tool-calls:batch']);
  });
});
