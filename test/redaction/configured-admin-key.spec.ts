import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedPath } from '../../src/logging/logging.js';
import { holdsCredentialShape } from '../../src/redaction/credential-shape.js';
import { call, rowOf, setupNangoOrg } from '../executor/support.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';

/**
 * The test gateway's BOOTSTRAP_ADMIN_KEY has no minted shape (tgw_ + 41 characters, not 43): once the configuration is
 * loaded at start-up, redaction knows it by its value.
 */
describe('redaction: the configured BOOTSTRAP_ADMIN_KEY, whatever its shape', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is not in input_redacted nor error_text, nor in a logged path, and an identifier holding it is refused', async () => {
    // A parameter name holding it, with a wrong-typed value: refused before the vendor (which would echo it back).
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/items', query: { [`key ${TEST_ADMIN_KEY}`]: {} } });
    expect(res.status).toBe(422);
    const row = await rowOf(h, res.body.toolCallId as string);
    expect(JSON.stringify(row.input_redacted)).not.toContain(TEST_ADMIN_KEY);
    expect(String(row.error_text)).not.toContain(TEST_ADMIN_KEY);
    expect(JSON.stringify(res.body)).not.toContain(TEST_ADMIN_KEY);
    expect(loggedPath(`/v1/api-keys/${TEST_ADMIN_KEY}/revoke`)).not.toContain(TEST_ADMIN_KEY);
    expect(holdsCredentialShape(TEST_ADMIN_KEY)).toBe(true);
  });
});
