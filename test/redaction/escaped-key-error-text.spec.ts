import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, setupNangoOrg } from '../executor/support.js';

/**
 * describeAjvError (src/catalog/tool-catalog.service.ts:87) names the parameter from ajv's instancePath, a JSON pointer
 * in which every "/" of a key is written "~1". The name is then redacted (inlineModelName), but the shapes that need
 * "//" or "/" (a URL's password, a Slack webhook path) no longer match, so the key's secret is stored as error_text
 * and handed back in the tool_result, while input_redacted (which redacts the key as written) hides it.
 */
const PASSWORD = 'Wk9qR2mT7xLp4Vb8Nc1Hs6Dz3Fy5Ja0Qe';
const WEBHOOK_SECRET = 'Qz8Lm2Xv7Rk4Tp9Wn1Bc6Hd3Fs5Jy0Ga';

describe('redaction: a secret in a parameter NAME reaches error_text through its JSON-pointer form', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ['a URL with a password', `https://app:${PASSWORD}@db.example.com`, PASSWORD],
    ['a Slack incoming webhook', `https://hooks.slack.com/services/T0001/B0001/${WEBHOOK_SECRET}`, WEBHOOK_SECRET],
  ])('%s as a query parameter name with a wrong-typed value: not in error_text nor the tool_result', async (_label, key, secret) => {
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/items', query: { [key]: {} } });
    expect(res.status).toBe(422);
    const row = await rowOf(h, res.body.toolCallId as string);
    // control: the ledger's copy of the input hides it
    expect(JSON.stringify(row.input_redacted).includes(secret)).toBe(false);
    expect({ errorText: String(row.error_text).includes(secret), toolResult: JSON.stringify(res.body.toolResult).includes(secret) }).toEqual({ errorText: false, toolResult: false });
  });
});
