import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyRateLimiter } from '../../src/auth/key-rate-limiter.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { refundUse } from './support.js';

const MB = 1024 * 1024;
/** The page's budget of redacted input (16 MiB, as the tool-call listing's), plus one row past it and the other fields. */
const PAGE_CAP = 16 * MB + 1.1 * MB;

interface ApprovalItem {
  id: string;
}
interface Page {
  items: ApprovalItem[];
  nextCursor: string | null;
}

/**
 * GET /v1/approvals ends a page early once its rows hold 16 MiB of redacted input, as GET /v1/tool-calls does
 * (README "a page of large rows ends sooner"): each approval carries its call's redacted input (up to the redactor's
 * ~256 K characters), and an agent can fill the expert queue with large nango_proxy.post calls (high risk: an expert
 * approval by default). Such a page still holds at least one row, and its nextCursor continues after the last one.
 */
describe('approvals listing: a page of large approvals ends sooner', () => {
  const BIG = 100;
  const SMALL = 30;
  let h: Harness;
  let big: OrgSetup;
  let small: OrgSetup;
  let bigExpert: string;
  let smallExpert: string;

  /** Every page of the listing with `query`, following nextCursor, and each page's body size. */
  async function walk(key: string, query: Record<string, string>): Promise<{ pages: Page[]; sizes: number[] }> {
    const pages: Page[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.t.http
        .get('/v1/approvals')
        .query(cursor ? { ...query, cursor } : query)
        .set(bearer(key));
      expect(res.status, res.text.slice(0, 300)).toBe(200);
      const page = res.body as Page;
      pages.push(page);
      sizes.push(res.text.length);
      cursor = page.nextCursor;
      expect(pages.length, 'pages').toBeLessThanOrEqual(BIG + 1);
    } while (cursor);
    return { pages, sizes };
  }

  /** The org's approvals in the listing's order: newest first, id breaking ties (created_at to the microsecond). */
  const idsOf = async (org: OrgSetup): Promise<string[]> =>
    ((await h.t.ds.query('SELECT id FROM approval_requests WHERE org_id = $1 ORDER BY created_at DESC, id DESC', [org.orgId])) as { id: string }[]).map(
      (r) => r.id,
    );

  /** The walk's ids: every approval of the org, each once, in the listing's order across pages. */
  async function expectEveryApprovalOnce(org: OrgSetup, pages: Page[], expected: number): Promise<void> {
    const ids = pages.flatMap((p) => p.items.map((a) => a.id));
    expect(new Set(ids).size, 'no approval repeated').toBe(ids.length);
    expect(ids, 'no approval skipped, newest first').toEqual(await idsOf(org));
    expect(ids).toHaveLength(expected);
  }

  beforeAll(async () => {
    h = await startHarness();
    big = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] }); // no rule: the catalog's high risk asks an expert
    bigExpert = (await createKey(h.t, big.orgId, 'expert')).key;
    // ~225 KB of redacted input per call: 25 strings under the redactor's 10,000-character string cap; ~22 MB in all.
    const body = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`field${i}`, `${i}`.padEnd(9_000, 'q')]));
    for (let i = 0; i < BIG; i += 10) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          h.t.http.post(`/v1/runs/${big.runId}/tool-calls`).set(bearer(big.agentKey)).send(toolUse('nango_proxy', { action: 'post', path: '/v1/notes', body })),
        ),
      );
      for (const a of answers) expect(a.status, JSON.stringify(a.body).slice(0, 300)).toBe(202);
    }
    small = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    smallExpert = (await createKey(h.t, small.orgId, 'expert')).key;
    for (let i = 0; i < SMALL; i += 10) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, j) => h.t.http.post(`/v1/runs/${small.runId}/tool-calls`).set(bearer(small.agentKey)).send(refundUse('1.00', `${1000 + i + j}`))),
      );
      for (const a of answers) expect(a.status, JSON.stringify(a.body).slice(0, 300)).toBe(202);
    }
  }, 180_000);
  afterAll(async () => {
    await h?.close();
  });

  it('a page of large pending approvals stays within 16 MiB of redacted input, holds at least one row and offers a nextCursor', async () => {
    const res = await h.t.http.get('/v1/approvals').query({ status: 'pending', limit: '200' }).set(bearer(bigExpert));
    expect(res.status).toBe(200);
    const page = res.body as Page;
    expect(res.text.length).toBeLessThan(PAGE_CAP);
    expect(page.items.length).toBeGreaterThanOrEqual(1);
    expect(page.items.length).toBeLessThan(BIG);
    expect(page.nextCursor).toEqual(expect.any(String));
  }, 60_000);

  it('a page is charged by its size, as a ledger list page is: the key is charged for the redacted input of the rows it returns', async () => {
    const limiter = h.t.app.get(KeyRateLimiter);
    const charge = vi.spyOn(limiter, 'chargeListing');
    try {
      const res = await h.t.http.get('/v1/approvals').query({ status: 'pending', limit: '5' }).set(bearer(bigExpert));
      expect(res.status).toBe(200);
      const ids = (res.body as Page).items.map((i) => i.id);
      const [{ bytes }] = (await h.t.ds.query('SELECT sum(octet_length(input_redacted::text))::int AS bytes FROM approval_requests WHERE id = ANY($1::uuid[])', [ids])) as {
        bytes: number;
      }[];
      expect(bytes).toBeGreaterThan(5 * 200_000);
      expect(charge.mock.calls).toEqual([[expect.any(String), bytes, 'page']]);
    } finally {
      charge.mockRestore();
    }
  }, 60_000);

  it('walking nextCursor over pages cut by size returns every approval exactly once, newest first, each page within the cap', async () => {
    for (const limit of ['200', '40']) {
      const { pages, sizes } = await walk(bigExpert, { status: 'pending', kind: 'expert', limit });
      for (const [i, size] of sizes.entries()) expect(size, `page ${i} at limit ${limit}`).toBeLessThan(PAGE_CAP);
      for (const p of pages) expect(p.items.length).toBeGreaterThanOrEqual(1);
      // 200 rows of ~225 KB are ~44 MB: that page ends early; 40 of them (~9 MB) fit, and those pages end at the limit.
      if (limit === '200') expect(pages.length, 'limit 200').toBeGreaterThan(1);
      else expect(pages.map((p) => p.items.length), 'limit 40').toEqual([40, 40, 20]);
      await expectEveryApprovalOnce(big, pages, BIG);
    }
  }, 120_000);

  it('approvals created at the same instant are neither skipped nor repeated where a page ends early (id breaks the tie)', async () => {
    await h.t.ds.query(`UPDATE approval_requests SET created_at = date_trunc('second', now()) WHERE org_id = $1`, [big.orgId]);
    const { pages, sizes } = await walk(bigExpert, { status: 'pending', limit: '200' });
    for (const size of sizes) expect(size).toBeLessThan(PAGE_CAP);
    expect(pages.length).toBeGreaterThan(1);
    await expectEveryApprovalOnce(big, pages, BIG);
  }, 120_000);

  it('a page of small approvals is unaffected: limit rows per page, and one page when the limit covers them all', async () => {
    const { pages } = await walk(smallExpert, { status: 'pending', limit: '10' });
    expect(pages.map((p) => p.items.length)).toEqual([10, 10, 10]);
    await expectEveryApprovalOnce(small, pages, SMALL);
    const all = await h.t.http.get('/v1/approvals').query({ status: 'pending', limit: '200' }).set(bearer(smallExpert));
    expect(all.status).toBe(200);
    expect((all.body as Page).items).toHaveLength(SMALL);
    expect((all.body as Page).nextCursor).toBeNull();
  }, 60_000);
});
