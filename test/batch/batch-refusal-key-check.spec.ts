/**
 * A request refused before its statement re-reads the key checks the key first (a revoked key is told 401), with one
 * query. In a batch each item goes through the same path: a live key posting 32 refused items paid 32 key look-ups
 * (found by a review of the change), where one does, the batch's items sharing one principal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

describe('a batch of refused items and the key re-check', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('re-reads a live key at most once per batch', async () => {
    const org = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    let keyReads = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (/FROM api_keys WHERE id = \$1 AND revoked_at IS NULL/.test(text)) keyReads++;
      return send();
    });
    try {
      const toolUses = Array.from({ length: 32 }, (_, i) => ({ type: 'tool_use', id: `toolu_bad_${i}`, name: 'amazon_query', input: 'not an object' }));
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses });
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
      // Before: 32 (one per refused item).
      expect(keyReads).toBe(1);
      expect((res.body.results as { status: number }[]).map((r) => r.status)).toEqual(Array(32).fill(400));
    } finally {
      undo();
    }
  });
});
