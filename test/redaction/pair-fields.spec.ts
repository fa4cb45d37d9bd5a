import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, setupNangoOrg } from '../executor/support.js';

/**
 * {name|property|attribute|variable, text|data|content|value} pairs: the name member says the value is a secret or
 * identity data, but the pair is only recognised when its members are in PAIR_NAME_KEYS / PAIR_VALUE_KEYS
 * (src/redaction/redaction-keys.ts:62-63). Bodies below are real API shapes sent through nango_proxy.post.
 */
const SECRET = 'Wk9qR2mT7xLp4Vb8Nc1Hs6Dz3Fy5Ja0Qe'; // an opaque provider secret: no vendor shape
const DOB = '1956-05-12';

describe('redaction: name/value pairs under other member names reach the ledger', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  const ledgerText = async (body: Record<string, unknown>) => {
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/items', body });
    expect(res.body.status).toBe('succeeded');
    const row = await rowOf(h, res.body.toolCallId as string);
    return { input: JSON.stringify(row.input_redacted), output: JSON.stringify(row.output_redacted) };
  };

  it('Cloudflare Workers secret binding {name, text, type: "secret_text"}: the secret is not in input_redacted / output_redacted', async () => {
    const { input, output } = await ledgerText({ bindings: [{ type: 'secret_text', name: 'STRIPE_API_KEY', text: SECRET }] });
    expect(input).not.toContain(SECRET);
    expect(output).not.toContain(SECRET);
  });

  it('HubSpot v1 contact {property, value}: a client_secret property and the date of birth are not in the ledger', async () => {
    const { input, output } = await ledgerText({
      properties: [
        { property: 'client_secret', value: SECRET },
        { property: 'date_of_birth', value: DOB },
      ],
    });
    expect(input).not.toContain(SECRET);
    expect(output).not.toContain(SECRET);
    // README: identity data (dates of birth) goes from params too, "({name: "date_of_birth", value})"
    expect(input).not.toContain(DOB);
    expect(output).not.toContain(DOB);
  });

  it('for comparison: the same pair under {name, value} is redacted (passes today)', async () => {
    const { input, output } = await ledgerText({ properties: [{ name: 'client_secret', value: SECRET }, { name: 'date_of_birth', value: DOB }] });
    expect(input + output).not.toContain(SECRET);
    expect(input + output).not.toContain(DOB);
  });
});
