import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/redaction/redaction.service.js';
import { call, rowOf, setupNangoOrg } from '../executor/support.js';
import type { Harness, OrgSetup } from '../support/scenario.js';
import { startHarness } from '../support/scenario.js';

/**
 * What reaches the ledger row (tool_calls.input_redacted / output_redacted) for Nango proxy calls whose provider
 * answer echoes what was sent, as many search and create endpoints do: the emulator's upstream echoes a GET's query
 * and a POST's body. Each value below was stored in clear before.
 */
describe('redaction: vendor payloads that reached the ledger in clear', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  async function ledgerRow(input: Record<string, unknown>): Promise<{ input: string; output: string; row: Record<string, unknown> }> {
    const res = await call(h, org, 'nango_proxy', input);
    const body = res.body as { status: string; toolCallId: string };
    expect(body.status, JSON.stringify(res.body).slice(0, 300)).toBe('succeeded');
    const row = await rowOf(h, body.toolCallId);
    return { input: JSON.stringify(row.input_redacted), output: JSON.stringify(row.output_redacted), row };
  }

  it('a GET whose query carries provider credentials, a percent-encoded secret, tax and bank numbers and a name', async () => {
    const query = {
      hook: 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX',
      refresh: 'xoxe-1-My0xLTEyMzQ1Njc4OTAtMTIzNDU2Nzg5MDEyMy1hYmNkZWY',
      app: 'xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef',
      google: 'ya29.a0AfH6SMBx3kLqabcdefghijklmnopqrstuvwxyz0123456789',
      client: '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',
      storage: 'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abcdEFGH1234abcdEFGH1234==;EndpointSuffix=core.windows.net',
      next: 'https%3A%2F%2Fapi.example.com%2Fv1%3Fapi_key%3Dsupersecret123',
      redirect_uri: 'https%3A%2F%2Fx.com%2Fcb%3Fpassword%3Dhunter2xyz%26u%3D1',
      tax_number: 'DE123456789',
      account_no: '12345678',
      account_holder_name: 'Jenny Rosen',
      page: '2',
    };
    const { input, output, row } = await ledgerRow({ action: 'get', path: '/v1/customers/search', query });

    const secrets = ['XXXXXXXXXXXXXXXXXXXXXXXX', 'My0xLTEyMzQ1Njc4OTAtMTIzNDU2Nzg5MDEyMy1hYmNkZWY', '0123456789abcdef0123456789abcdef', 'a0AfH6SMBx3kLq', '1a2b3c4d5e6f7g8h9i0jKLMNOPQR', 'abcdEFGH1234', 'supersecret123', 'hunter2xyz', 'DE123456789'];
    for (const secret of secrets) {
      expect(input, 'input_redacted').not.toContain(secret);
      expect(output, 'output_redacted').not.toContain(secret);
    }
    for (const personal of ['12345678', 'Jenny Rosen']) expect(output, 'output_redacted').not.toContain(personal);
    const echoed = (row.output_redacted as { query: Record<string, string> }).query;
    expect(echoed).toMatchObject({
      hook: `https://hooks.slack.com/services/${REDACTED}`,
      next: `https%3A%2F%2Fapi.example.com%2Fv1%3Fapi_key%3D${REDACTED}`,
      redirect_uri: `https%3A%2F%2Fx.com%2Fcb%3Fpassword%3D${REDACTED}%26u%3D1`,
      account_no: REDACTED,
      account_holder_name: REDACTED,
      page: '2',
    });
  });

  it('a POST of CRM, billing and order records: numbers, personal names and name/value pairs go, the facts about them stay', async () => {
    const body = {
      Contacts: [{ ContactID: 'c1', BankAccountDetails: '01-0123-0123456-00', TaxNumber: '12-345-678', AccountNumber: 'CUST-0042' }],
      identity: { national_insurance_number: 'QQ123456C', cpf: '123.456.789-09', passportNo: 'X1234567', drivers_license: 'D1234567', bsb: '062-000' },
      customer: { id: 'cus_1', object: 'customer', name: 'Jenny Rosen', shipping: { name: 'Jenny Rosen', address: { line1: '1 Main', postal_code: '94103' } } },
      charge: { id: 'ch_1', amount: 1999, billing_details: { name: 'Jenny Rosen', email: null } },
      salesforce: {
        records: [
          { attributes: { type: 'Contact' }, Id: '0035e00000AbC', Name: 'Rose Gonzalez', Email: 'rose@edge.com' },
          { attributes: { type: 'Account' }, Id: '0015e00000XyZ', Name: 'Edge Communications' },
          { Id: '00Q5e00000ABC', Company: 'Farmers Coop', Status: 'Open', Street: '321 Westcott', PostalCode: '10001' },
        ],
      },
      slack: { user: { id: 'W1', real_name: 'Egon Spengler', profile: { real_name_normalized: 'Egon Spengler' } } },
      github: { login: 'octocat', name: 'Monalisa Octocat' },
      mailchimp: { members: [{ status: 'subscribed', merge_fields: { FNAME: 'Urist', LNAME: 'McVankab' } }] },
      zendesk: { requester: { name: 'Jane Requester' } },
      order: {
        name: '#1001',
        line_items: [{ name: 'Aurora Trail Running Shoe', quantity: 1 }],
        note_attributes: [
          { name: 'Phone', value: '5555550142' },
          { name: 'date_of_birth', value: '1990-01-01' },
          { name: 'gift_wrap', value: 'yes' },
        ],
        metafields: [{ namespace: 'custom', key: 'customer_phone', value: '4155552671' }],
      },
    };
    const { output, row } = await ledgerRow({ action: 'post', path: '/v1/records', body });

    const gone = [
      '01-0123-0123456-00',
      '12-345-678',
      'QQ123456C',
      '123.456.789-09',
      'X1234567',
      'D1234567',
      '062-000',
      'Jenny Rosen',
      'Rose Gonzalez',
      '321 Westcott',
      'Egon Spengler',
      'Monalisa Octocat',
      'Urist',
      'McVankab',
      'Jane Requester',
      '5555550142',
      '1990-01-01',
      '4155552671',
    ];
    for (const value of gone) expect(output, 'output_redacted').not.toContain(value);
    const received = (row.output_redacted as { received: typeof body }).received;
    expect(received.salesforce.records[1]).toEqual({ attributes: { type: 'Account' }, Id: '0015e00000XyZ', Name: 'Edge Communications' });
    expect(received.salesforce.records[2]).toEqual({ Id: '00Q5e00000ABC', Company: 'Farmers Coop', Status: 'Open', Street: REDACTED, PostalCode: '10001' });
    expect(received.customer.shipping.address).toEqual({ postal_code: '94103' });
    expect(received.order.name).toBe('#1001');
    expect(received.order.line_items).toEqual([{ name: 'Aurora Trail Running Shoe', quantity: 1 }]);
    expect(received.order.note_attributes[2]).toEqual({ name: 'gift_wrap', value: 'yes' });
    expect(received.github.login).toBe('octocat');
    expect(received.charge.amount).toBe(1999);
  });

  it('a POST of a long note: a URL password past what redaction read is not stored, even after a PEM block shortened the text', async () => {
    const pem = `-----BEGIN PRIVATE KEY-----\n${'A'.repeat(4000)}\n-----END PRIVATE KEY-----`;
    const url = 'https://admin:SuperSecretPass99@db.internal/x';
    const filler = 'x'.repeat(11_024 - pem.length - 1 - url.indexOf('@'));
    const note = `${pem} ${filler}${url}${' tail'.repeat(100)}`;
    expect(note.indexOf('@')).toBe(11_024); // just past the 10,000 characters kept and the 1,024 read beyond them

    const { input, output } = await ledgerRow({ action: 'post', path: '/v1/notes', body: { note } });

    expect(input, 'input_redacted').not.toContain('SuperSecretPass99');
    expect(output, 'output_redacted').not.toContain('SuperSecretPass99');
    expect(input).toContain(`${REDACTED} xxxx`);
  });
});
