import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * PUT /v1/orgs/:orgId/feature-flags/:flag with a name we do not have is a 404 that names it back only when it
 * looks like a name: an admin may paste a token into the path, and the problem body must not repeat it.
 */
describe('feature flags: an unknown flag name', () => {
  let t: TestApp;
  let org: string;
  const setFlag = (flag: string) => t.http.put(`/v1/orgs/${org}/feature-flags/${flag}`).set(adminAuth).send({ enabled: true });

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Flag Echo Co');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a token pasted as the flag name is not repeated in the 404; the known flags are listed', async () => {
    // A fresh one: this test's own request (its URL) is in the run log the run-wide leak scan reads, so it must not
    // be a secret another test registered.
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    const res = await setFlag(token);
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('NOT_FOUND');
    expect(JSON.stringify(res.body)).not.toContain(token.slice(6));
    expect(res.body.detail).toContain('(known: tool_calling_enabled)');
  });

  it('an ordinary unknown name is named, with the known flags', async () => {
    const res = await setFlag('beta_mode');
    expect(res.status).toBe(404);
    expect(res.body.detail).toBe('unknown feature flag "beta_mode" (known: tool_calling_enabled)');
  });

  it('a known flag is still set', async () => {
    const res = await setFlag('tool_calling_enabled');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ flag: 'tool_calling_enabled', enabled: true });
  });
});
