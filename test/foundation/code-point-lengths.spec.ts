import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Text limits are counted in code points, as the OpenAPI maxLength (JSON Schema) and PostgreSQL's length() count.
 * @Length (validator.js isLength) did not count a variation selector after a character: an org name of 200 letters
 * and a U+FE0F passed it, and the column's CHECK (length(name) BETWEEN 1 AND 200) refused it — 500 INTERNAL. An API
 * key name of 101 code points was stored against its documented maxLength of 100.
 */
describe('text limits in code points', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an org name past 200 code points is 400 VALIDATION_FAILED (was 500); 200 emoji (400 UTF-16 units) are 201', async () => {
    for (const name of [`${'a'.repeat(200)}\uFE0F`, `${'b'.repeat(199)}\uFE0E\uFE0F`]) {
      const res = await t.http.post('/v1/orgs').set(adminAuth).send({ name });
      expect(res.headers['content-type']).toMatch(/problem\+json/);
      expect({ status: res.status, code: res.body.code, detail: res.body.detail }).toEqual({
        status: 400, code: 'VALIDATION_FAILED', detail: expect.stringContaining('name must be shorter than or equal to 200 characters'),
      });
    }
    const ok = await t.http.post('/v1/orgs').set(adminAuth).send({ name: '😀'.repeat(200) });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    const [row] = (await t.ds.query('SELECT length(name) AS n FROM orgs WHERE id = $1', [ok.body.id])) as { n: number }[];
    expect(row.n).toBe(200);
  });

  it('an API key name past its 100 code points is 400, not stored', async () => {
    const org = await t.http.post('/v1/orgs').set(adminAuth).send({ name: 'Key name org' });
    const res = await t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: org.body.id, role: 'agent', name: `${'n'.repeat(100)}\uFE0F` });
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    const [{ n }] = (await t.ds.query('SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1', [org.body.id])) as { n: number }[];
    expect(n).toBe(0);
  });
});
