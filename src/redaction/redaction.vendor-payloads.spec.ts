import { describe, expect, it } from 'vitest';
import { REDACTED, redactInput, redactOutput, TRUNCATED } from './redaction.service.js';

const json = (value: unknown): string => JSON.stringify(value);

describe('redactOutput: bank, tax and identity numbers under the names vendors give them', () => {
  it.each([
    ['BankAccountDetails', '01-0123-0123456-00'], // Xero Contact
    ['bank_account_number', '000123456789'],
    ['account_no', '12345678'],
    ['accountNo', '12345678'],
    ['acct_num', '12345678'],
    ['routing_no', '110000000'],
    ['bsb', '062-000'],
    ['bsb_number', '062-000'],
    ['sort_code', '40-47-84'],
    ['TaxNumber', '12-345-678'], // Xero Contact
    ['tax_number', 'DE123456789'],
    ['tax_no', 'DE123456789'],
    ['vat_id', 'DE123456789'],
    ['VATNo', 'DE123456789'],
    ['national_insurance_number', 'QQ123456C'],
    ['nino', 'QQ123456C'],
    ['social_insurance_number', '046 454 286'],
    ['cpf', '123.456.789-09'],
    ['passportNo', 'X1234567'],
    ['passport', 'X1234567'],
    ['drivers_license', 'D1234567'],
    ['drivingLicenceNumber', 'MORGA657054SM9IJ'],
  ])('%s', (key, value) => {
    const out = redactOutput({ Contacts: [{ ContactID: 'c1', [key]: value }] });
    expect(out).toEqual({ Contacts: [{ ContactID: 'c1', [key]: REDACTED }] });
  });

  it('tax numbers are secrets in params too, as tax ids already were', () => {
    expect(redactInput({ TaxNumber: '12-345-678', vat_id: 'DE123456789', tax_no: 'DE1', nino: 'QQ123456C', cpf: '123.456.789-09' })).toEqual({
      TaxNumber: REDACTED,
      vat_id: REDACTED,
      tax_no: REDACTED,
      nino: REDACTED,
      cpf: REDACTED,
    });
  });

  it('keeps facts about such numbers, and names that only look alike', () => {
    const facts = {
      bank_account_id: 'ba_1Nv0',
      bankAccountStatus: 'verified',
      passport_required: true,
      passport_status: 'valid',
      vat_id_status: 'verified',
      account_id: 'acct_1',
      accountId: 'acct_1',
      account_notes: 'VIP',
      accountNotification: 'weekly',
      account_name: 'Acme Ltd',
      tax_rate: 0.2,
      total_tax: '10.00',
      vat_amount: '3.80',
      private_id: 'p1',
      taxes_included: false,
      nominee: 'n1',
    };
    expect(redactOutput(facts)).toEqual(facts);
  });
});

describe('redactOutput: the name of a person outside the few person keys', () => {
  it('Stripe: a customer, its shipping, a charge’s billing_details and a bank account’s holder', () => {
    const customer = {
      id: 'cus_1',
      object: 'customer',
      name: 'Jenny Rosen',
      description: 'VIP',
      shipping: { name: 'Jenny Rosen', phone: null, address: { line1: '1 Main', postal_code: '94103' } },
    };
    expect(redactOutput(customer)).toEqual({
      id: 'cus_1',
      object: 'customer',
      name: REDACTED,
      description: 'VIP',
      shipping: { name: REDACTED, phone: null, address: { postal_code: '94103' } },
    });
    expect(redactOutput({ id: 'ch_1', amount: 100, billing_details: { name: 'Jenny Rosen', email: null } })).toEqual({
      id: 'ch_1',
      amount: 100,
      billing_details: { name: REDACTED, email: null },
    });
    expect(redactOutput({ id: 'ba_1', object: 'bank_account', account_holder_name: 'Jane Austen', bank_name: 'STRIPE TEST BANK', last4: '6789' })).toEqual({
      id: 'ba_1',
      object: 'bank_account',
      account_holder_name: REDACTED,
      bank_name: 'STRIPE TEST BANK',
      last4: REDACTED,
    });
  });

  it('Salesforce: a Contact’s, a Lead’s and a record owner’s Name go; an Account’s stays', () => {
    const out = redactOutput({
      totalSize: 3,
      records: [
        { attributes: { type: 'Contact', url: '/services/data/v59.0/sobjects/Contact/003' }, Id: '003', Name: 'Rose Gonzalez', Email: 'rose@edge.com' },
        { attributes: { type: 'Lead', url: '/services/data/v59.0/sobjects/Lead/00Q' }, Id: '00Q', Name: 'Bertha Boxer', Company: 'Farmers Coop' },
        { attributes: { type: 'Account', url: '/services/data/v59.0/sobjects/Account/001' }, Id: '001', Name: 'Edge Communications', Owner: { Name: 'Sam Owner' } },
      ],
    });
    const text = json(out);
    for (const name of ['Rose Gonzalez', 'Bertha Boxer', 'Sam Owner', 'rose@edge.com']) expect(text).not.toContain(name);
    for (const kept of ['Edge Communications', 'Farmers Coop', '003', '00Q', '001']) expect(text).toContain(kept);
  });

  it('Slack real_name, a GitHub user and commit author, Mailchimp FNAME / LNAME, a Zendesk requester', () => {
    const out = redactOutput({
      slack: { ok: true, user: { id: 'W1', name: 'egon', real_name: 'Egon Spengler', profile: { title: 'Ghostbuster', real_name: 'Egon Spengler', real_name_normalized: 'Egon Spengler', display_name: 'Spengs' } } },
      github: { login: 'octocat', id: 1, name: 'Monalisa Octocat', company: 'GitHub', email: 'octocat@github.com' },
      commit: { sha: 'abc', commit: { author: { name: 'Monalisa Octocat', date: '2026-01-01' }, committer: { name: 'GitHub', date: '2026-01-01' } } },
      mailchimp: { members: [{ id: 'm1', status: 'subscribed', merge_fields: { FNAME: 'Urist', LNAME: 'McVankab' } }] },
      zendesk: { ticket: { subject: 'Help', requester: { name: 'Jane Requester', email: 'jr@example.com' } } },
    });
    const text = json(out);
    for (const name of ['Egon Spengler', 'Spengs', 'egon"', 'Monalisa Octocat', 'Urist', 'McVankab', 'Jane Requester']) expect(text).not.toContain(name);
    for (const kept of ['Ghostbuster', 'octocat', 'GitHub', 'subscribed', 'Help', '2026-01-01']) expect(text).toContain(kept);
  });

  it('Jira reporter and creator, Salesforce CreatedBy: whoever sits under a key that names a person’s role', () => {
    const out = redactOutput({
      fields: { summary: 'Refund stuck', reporter: { accountId: 'a1', displayName: 'Ann Reporter' }, creator: { accountId: 'a2', displayName: 'Cy Creator' } },
      CreatedBy: { attributes: { type: 'User' }, Name: 'Dee Admin' },
    });
    expect(out).toEqual({
      fields: { summary: 'Refund stuck', reporter: { accountId: 'a1', displayName: REDACTED }, creator: { accountId: 'a2', displayName: REDACTED } },
      CreatedBy: { attributes: { type: 'User' }, Name: REDACTED },
    });
  });

  it('product, shop, company, plan and shipping-method names stay', () => {
    const values = {
      shop: { name: 'Snowdevil', email_domain_verified: true, myshopify_domain: 'snowdevil.myshopify.com' },
      order: { name: '#1001', line_items: [{ name: 'Aurora Trail Running Shoe', sku: 'AUR-9' }], shipping_lines: [{ title: 'Standard' }] },
      billing_plan: { name: 'Pro' },
      shipping_method: { name: 'UPS Ground' },
      company: { name: 'Acme Ltd' },
      organization: { login: 'github-org', name: 'GitHub Org', type: 'Organization' },
      product: { name: 'Shoe', type: 'simple' },
      variant: { __typename: 'ProductVariant', name: 'Blue' },
    };
    expect(redactOutput(values)).toEqual(values);
  });
});

describe('redactOutput: {name, value} pairs that carry personal data', () => {
  it('Shopify note_attributes and metafields: the value of a phone, birth date, account number, address or email pair goes', () => {
    const out = redactOutput({
      note_attributes: [
        { name: 'Phone', value: '5555550142' },
        { name: 'date_of_birth', value: '1990-01-01' },
        { name: 'account_number', value: '12345678' },
        { name: 'Delivery address', value: '742 Evergreen Terrace' },
        { name: 'Gift wrap', value: 'yes' },
      ],
      metafields: [
        { key: 'customer_phone', value: '4155552671', namespace: 'custom' },
        { key: 'contact_email', value: 'x@y.example' },
        { key: 'loyalty_tier', value: 'gold' },
      ],
    });
    expect(out).toEqual({
      note_attributes: [
        { name: 'Phone', value: REDACTED },
        { name: 'date_of_birth', value: REDACTED },
        { name: 'account_number', value: REDACTED },
        { name: 'Delivery address', value: REDACTED },
        { name: 'Gift wrap', value: 'yes' },
      ],
      metafields: [
        { key: 'customer_phone', value: REDACTED, namespace: 'custom' },
        { key: 'contact_email', value: REDACTED },
        { key: 'loyalty_tier', value: 'gold' },
      ],
    });
  });

  it('params keep such pairs: input redaction hides secrets only', () => {
    const params = { note_attributes: [{ name: 'Phone', value: '5555550142' }] };
    expect(redactInput(params)).toEqual(params);
  });
});

describe('redactOutput: a record with a street among other fields is not an address', () => {
  it('a Salesforce Lead keeps its id, company and status; its street and name go, its postal code stays', () => {
    const lead = { Id: '00Q5e00000ABC', Name: 'Bertha Boxer', Company: 'Farmers Coop', Status: 'Open', Street: '321 Westcott', PostalCode: '10001' };
    expect(redactOutput({ records: [lead] })).toEqual({
      records: [{ Id: '00Q5e00000ABC', Name: REDACTED, Company: 'Farmers Coop', Status: 'Open', Street: REDACTED, PostalCode: '10001' }],
    });
  });

  it('a shipment’s addressee with a few more fields than an address has: the street lines and the name go', () => {
    const to = { id: 'adr_1', object: 'Address', name: 'Jane Doe', company: 'Acme', street1: '1 Main St', street2: 'Apt 2', zip: '10001', phone: '4155552671', residential: true, mode: 'test', created_at: '2026-01-01' };
    expect(redactOutput({ to })).toEqual({
      to: { id: 'adr_1', object: 'Address', name: REDACTED, company: 'Acme', street1: REDACTED, street2: REDACTED, zip: '10001', phone: REDACTED, residential: true, mode: 'test', created_at: '2026-01-01' },
    });
  });

  it('an object made mostly of address fields under any key is still kept to its postal code', () => {
    expect(redactOutput({ location: { name: 'Warehouse', line1: '1 Main', line2: 'Unit 4', city: 'Oslo', postal_code: '0150', country: 'NO' } })).toEqual({
      location: { postal_code: '0150' },
    });
  });
});

describe('redaction: the 10,000-character cut never shows a secret redaction did not see whole', () => {
  const pem = `-----BEGIN PRIVATE KEY-----\n${'A'.repeat(4000)}\n-----END PRIVATE KEY-----`;
  const url = 'https://admin:SuperSecretPass99@db.internal/x';

  it('a URL password whose "@" is just past the window, once a PEM block before it shortened the text', () => {
    // The "@" that makes the password recognisable sits just past the 10,000 + 1,024 characters redaction reads.
    const filler = 'x'.repeat(11_024 - pem.length - 1 - url.indexOf('@'));
    const note = `${pem} ${filler}${url}${' tail'.repeat(100)}`;
    expect(note.indexOf('@')).toBe(11_024);
    for (const redact of [redactInput, redactOutput]) {
      const out = (redact({ note }) as { note: string }).note;
      expect(out).not.toContain('SuperSecretPass99');
      expect(out.startsWith(`${REDACTED} xxx`)).toBe(true);
      expect(out.endsWith(`…${TRUNCATED}`)).toBe(true);
      expect(out.length).toBeLessThanOrEqual(10_000 + TRUNCATED.length + 1);
    }
  });

  it('a text redaction does not shorten is still cut at 10,000 characters, a secret straddling the cut redacted', () => {
    const note = `${'y'.repeat(9_990)} sk_live_abcdefghijklmnopqrstuvwxyz ${'z'.repeat(5_000)}`;
    const out = (redactInput({ note }) as { note: string }).note;
    expect(out).toBe(`${'y'.repeat(9_990)} ${REDACTED}`.slice(0, 10_000) + `…${TRUNCATED}`);
  });
});
