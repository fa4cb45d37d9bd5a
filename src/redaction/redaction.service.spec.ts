import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonbNumberLength } from '../common/storable-text.js';
import { CIRCULAR, REDACTED, REDACTION_LIMITS, RedactionService, redactInput, redactOutput, TRUNCATED } from './redaction.service.js';

const json = (value: unknown): string => JSON.stringify(value);

/** Runs fn and checks the argument is deep-equal to what it was before. */
function unchanged<T>(input: T, fn: (v: T) => unknown): unknown {
  const before = structuredClone(input);
  const out = fn(input);
  expect(input).toEqual(before);
  return out;
}

const shopifyGraphqlOrder = {
  data: {
    order: {
      id: 'gid://shopify/Order/5912345678901',
      legacyResourceId: '4111111111111111',
      name: '#1001',
      email: 'jane.doe@example.com',
      phone: '+15555550142',
      displayFinancialStatus: 'PAID',
      displayFulfillmentStatus: 'FULFILLED',
      createdAt: '2026-08-02T14:05:11Z',
      note: 'Leave at the back door, call (555) 555-0142 first',
      totalPriceSet: { shopMoney: { amount: '100.00', currencyCode: 'USD' } },
      customer: {
        id: 'gid://shopify/Customer/207119551',
        firstName: 'Jane',
        lastName: 'Doe',
        displayName: 'Jane Doe',
        defaultEmailAddress: { emailAddress: 'jane.doe@example.com' },
        defaultPhoneNumber: { phoneNumber: '+15555550142' },
        numberOfOrders: '3',
      },
      shippingAddress: {
        name: 'Jane Doe',
        address1: '742 Evergreen Terrace',
        address2: 'Apt 2',
        city: 'Springfield',
        province: 'Oregon',
        provinceCode: 'OR',
        zip: '97477',
        country: 'United States',
        countryCodeV2: 'US',
        phone: '+1 206-555-0199',
      },
      billingAddress: { name: 'Jane Doe', address1: '1 Market St', city: 'San Francisco', zip: '94107', phone: null },
      fulfillments: [{ status: 'SUCCESS', trackingInfo: [{ number: '1Z999AA10123456784', company: 'UPS' }] }],
      lineItems: { nodes: [{ name: 'Aurora Trail Running Shoe - 9 / Blue', sku: 'AUR-9-BLU', quantity: 1 }] },
      transactions: [
        {
          kind: 'SALE',
          status: 'SUCCESS',
          paymentDetails: {
            __typename: 'CardPaymentDetails',
            number: '•••• •••• •••• 4242',
            company: 'Visa',
            name: 'Jane Q Doe',
            bin: '424242',
            expirationMonth: 12,
            expirationYear: 2030,
          },
        },
      ],
    },
  },
  extensions: { cost: { requestedQueryCost: 6, actualQueryCost: 4 } },
};

const amazonOrder = {
  payload: {
    AmazonOrderId: '112-0000001-1234567',
    OrderStatus: 'Shipped',
    PurchaseDate: '2026-08-02T14:05:11Z',
    LastUpdateDate: '2026-08-03T09:12:40Z',
    FulfillmentChannel: 'MFN',
    MarketplaceId: 'ATVPDKIKX0DER',
    OrderTotal: { CurrencyCode: 'USD', Amount: '64.98' },
    PaymentMethodDetails: ['Standard'],
    BuyerInfo: {
      BuyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com',
      BuyerName: 'Marcus Webb',
      BuyerTaxInfo: { CompanyLegalName: 'Webb Holdings', TaxClassifications: [{ Name: 'VATNumber', Value: 'GB123456789' }] },
    },
    ShippingAddress: {
      Name: 'Marcus Webb',
      AddressLine1: '1600 Fake Harbor Blvd',
      City: 'Seattle',
      StateOrRegion: 'WA',
      PostalCode: '98101-1234',
      CountryCode: 'US',
      Phone: '+1 206-555-0199',
      AddressType: 'Residential',
    },
  },
};

const jumioDetails = {
  workflow: { id: 'a1b2c3d4-0000-4c5d-8e9f-000000000003', status: 'PROCESSED', definitionKey: '10013' },
  account: { id: 'f3b1c2d4-5e6f-4a70-8b9c-0d1e2f3a4b5c' },
  completedAt: '2026-08-04T11:03:41.000Z',
  credentials: [{ id: 'c1', category: 'ID', parts: [{ classifier: 'FRONT', href: 'https://retrieval.amer-1.jumio.ai/api/v1/x/front' }] }],
  decision: { type: 'WARNING', details: { label: 'WARNING' }, risk: { score: 50 } },
  capabilities: {
    similarity: [{ decision: { type: 'WARNING', details: { label: 'NOT_POSSIBLE' } } }],
    extraction: [
      {
        id: 'e1',
        decision: { type: 'PASSED', details: { label: 'OK' } },
        data: {
          type: 'ID_CARD',
          issuingCountry: 'JPN',
          firstName: 'AIKO',
          lastName: 'TANAKA',
          dateOfBirth: '1991-11-03',
          documentNumber: 'TK4417702',
          personalNumber: '770212-1234',
          gender: 'F',
          nationality: 'JPN',
          expiryDate: '2031-05-01',
          myNumber: '123456789012',
          address: { line1: '1-2-3 Shibuya', city: 'Tokyo', postalCode: '150-0002', formattedAddress: '1-2-3 Shibuya, Tokyo' },
        },
      },
    ],
  },
};

describe('redactOutput: realistic vendor payloads', () => {
  it('a Shopify order keeps ids, statuses, amounts, tracking and postal codes, and nothing personal', () => {
    const out = unchanged(shopifyGraphqlOrder, redactOutput);
    const text = json(out);
    for (const secret of ['jane', 'Jane', 'Doe', '5555550142', '555-0142', '206-555', 'Evergreen', 'Apt 2', 'Springfield', 'Oregon', 'Market St', 'San Francisco', '4242', 'Jane Q']) {
      expect(text).not.toContain(secret);
    }
    for (const kept of ['gid://shopify/Order/5912345678901', '4111111111111111', '#1001', 'PAID', 'FULFILLED', '100.00', 'USD', '1Z999AA10123456784', 'UPS', 'Aurora Trail Running Shoe - 9 / Blue', 'AUR-9-BLU', '2026-08-02T14:05:11Z', 'Visa', 'SALE']) {
      expect(text).toContain(kept);
    }
    const order = (out as typeof shopifyGraphqlOrder).data.order;
    expect(order.shippingAddress).toEqual({ zip: '97477' });
    expect(order.billingAddress).toEqual({ zip: '94107' });
    expect(order.email).toBe(REDACTED);
    expect(order.phone).toBe(REDACTED);
    expect(order.note).toBe(`Leave at the back door, call ${REDACTED} first`);
    expect(order.customer).toEqual({
      id: 'gid://shopify/Customer/207119551',
      firstName: REDACTED,
      lastName: REDACTED,
      displayName: REDACTED,
      defaultEmailAddress: REDACTED,
      defaultPhoneNumber: REDACTED,
      numberOfOrders: '3',
    });
    expect(order.transactions[0]!.paymentDetails).toEqual({
      __typename: 'CardPaymentDetails',
      number: REDACTED,
      company: 'Visa',
      name: REDACTED,
      bin: REDACTED,
      expirationMonth: REDACTED,
      expirationYear: REDACTED,
    });
    expect(order.lineItems.nodes[0]!.name).toBe('Aurora Trail Running Shoe - 9 / Blue');
  });

  it('a Shopify REST order (snake_case) is treated the same', () => {
    const rest = {
      order: {
        id: 450789469,
        name: '#1001',
        email: 'jane.doe@example.com',
        contact_email: 'jane.doe@example.com',
        browser_ip: '203.0.113.7',
        financial_status: 'paid',
        customer: { id: 207119551, first_name: 'Jane', last_name: 'Doe', email: 'jane.doe@example.com', phone: '+15555550142' },
        shipping_address: { name: 'Jane Doe', address1: '742 Evergreen Terrace', city: 'Springfield', province_code: 'OR', zip: '97477', phone: '+15555550142' },
        payment_details: { credit_card_bin: '424242', credit_card_number: '•••• •••• •••• 4242', credit_card_company: 'Visa' },
        fulfillments: [{ status: 'success', tracking_company: 'UPS', tracking_number: '1Z999AA10123456784' }],
      },
    };
    const out = unchanged(rest, redactOutput) as typeof rest;
    expect(out.order.shipping_address).toEqual({ zip: '97477' });
    expect(out.order.customer).toEqual({ id: 207119551, first_name: REDACTED, last_name: REDACTED, email: REDACTED, phone: REDACTED });
    expect(out.order.payment_details).toEqual({ credit_card_bin: REDACTED, credit_card_number: REDACTED, credit_card_company: 'Visa' });
    expect(out.order.browser_ip).toBe(REDACTED);
    expect(out.order.contact_email).toBe(REDACTED);
    expect(out.order.id).toBe(450789469);
    expect(out.order.fulfillments[0]!.tracking_number).toBe('1Z999AA10123456784');
  });

  it('an Amazon order keeps the order id, status, total and postal code only', () => {
    const out = unchanged(amazonOrder, redactOutput) as typeof amazonOrder;
    const text = json(out);
    for (const secret of ['Marcus', 'Webb', 'Fake Harbor', 'Seattle', '206-555-0199', 'marketplace.amazon.com', 'GB123456789', 'Residential']) {
      expect(text).not.toContain(secret);
    }
    expect(out.payload.ShippingAddress).toEqual({ PostalCode: '98101-1234' });
    expect(out.payload.BuyerInfo).toEqual({ BuyerEmail: REDACTED, BuyerName: REDACTED, BuyerTaxInfo: REDACTED });
    expect(out.payload.AmazonOrderId).toBe('112-0000001-1234567');
    expect(out.payload.OrderStatus).toBe('Shipped');
    expect(out.payload.OrderTotal).toEqual({ CurrencyCode: 'USD', Amount: '64.98' });
    expect(out.payload.MarketplaceId).toBe('ATVPDKIKX0DER');
    expect(out.payload.PurchaseDate).toBe('2026-08-02T14:05:11Z');
  });

  it('a Jumio details payload keeps decisions and drops identity data and image links', () => {
    const out = unchanged(jumioDetails, redactOutput);
    const text = json(out);
    for (const secret of ['AIKO', 'TANAKA', '1991-11-03', 'TK4417702', '770212-1234', '123456789012', 'Shibuya', 'Tokyo', 'retrieval.amer-1', '2031-05-01']) {
      expect(text).not.toContain(secret);
    }
    for (const kept of ['a1b2c3d4-0000-4c5d-8e9f-000000000003', 'PROCESSED', 'WARNING', 'NOT_POSSIBLE', 'PASSED', 'ID_CARD', 'JPN', '150-0002']) {
      expect(text).toContain(kept);
    }
    const data = (out as typeof jumioDetails).capabilities.extraction[0]!.data;
    expect(data.type).toBe('ID_CARD');
    expect(data.issuingCountry).toBe('JPN');
    expect(data.firstName).toBe(REDACTED);
    expect(data.dateOfBirth).toBe(REDACTED);
    expect(data.address).toEqual({ postalCode: '150-0002' });
    expect((out as typeof jumioDetails).decision.risk.score).toBe(50);
  });

  it('redacts phones under phone-like keys whatever their shape, and emails anywhere', () => {
    const out = redactOutput({
      mobile: '555 555 0142',
      fax: 5555550142,
      tel: '0142',
      contacts: ['jane@example.com', 'ops team'],
      deep: { text: 'reach us at +44 20 7946 0958 or help@shop.example' },
    });
    expect(out).toEqual({
      mobile: REDACTED,
      fax: REDACTED,
      tel: REDACTED,
      contacts: [REDACTED, 'ops team'],
      deep: { text: `reach us at ${REDACTED} or ${REDACTED}` },
    });
  });

  it('keeps order ids, dates, amounts and tracking numbers that merely look numeric', () => {
    const values = {
      orderId: '12345',
      amazon: '112-0000001-1234567',
      date: '2026-08-02',
      at: '2026-08-02T14:05:11+05:30',
      amount: '100.00',
      negative: '(100.00)',
      tracking: '1Z999AA10123456784',
      usps: '9400111899223100000000',
      count: 1234567890,
      zipPlus4: '98101-1234',
    };
    expect(redactOutput(values)).toEqual(values);
  });

  it('redacts addresses in arrays and address strings, and IBAN / last4 anywhere', () => {
    const out = redactOutput({
      addresses: [{ address1: '1 A St', zip: '10001' }, 'somewhere 12'],
      address: '742 Evergreen Terrace',
      iban: 'DE89370400440532013000',
      card: { last4: '4242', brand: 'visa' },
      accountNumber: 12345678,
      dob: '1990-01-01',
    });
    expect(out).toEqual({
      addresses: [{ zip: '10001' }, REDACTED],
      address: REDACTED,
      iban: REDACTED,
      card: { last4: REDACTED, brand: 'visa' },
      accountNumber: REDACTED,
      dob: REDACTED,
    });
  });

  it('detects an address object by its street line even under an unrelated key', () => {
    expect(redactOutput({ location: { street: 'Main St 1', postal_code: 'SW1A 1AA', city: 'London' } })).toEqual({
      location: { postal_code: 'SW1A 1AA' },
    });
    expect(redactOutput({ to: { AddressLine1: 'x', City: 'y' } })).toEqual({ to: {} });
  });

  it('only redacts a plain name inside a person', () => {
    expect(redactOutput({ product: { name: 'Shoe' }, buyer: { name: 'Ann' }, recipients: [{ name: 'Bob' }] })).toEqual({
      product: { name: 'Shoe' },
      buyer: { name: REDACTED },
      recipients: [{ name: REDACTED }],
    });
  });

  it('does everything input redaction does', () => {
    const out = redactOutput({ accessToken: 'abc', note: 'ssn 123-45-6789, card 4111 1111 1111 1111' });
    expect(out).toEqual({ accessToken: REDACTED, note: `ssn ${REDACTED}, card ${REDACTED}` });
  });
});

describe('redactInput', () => {
  it.each([
    'apiKey', 'api_key', 'API-KEY', 'x-api-key', 'token', 'accessToken', 'access_token', 'refreshToken', 'refresh_token',
    'password', 'passwd', 'secret', 'clientSecret', 'client_secret', 'Authorization', 'auth', 'cookie', 'Set-Cookie',
    'privateKey', 'private_key', 'ssn', 'cardNumber', 'card_number', 'cvv', 'CVC', 'pin', 'secretKey', 'x-shopify-access-token',
    'X-Amz-Signature', 'x-amz-signature', 'X-Amz-Credential', 'X-Amz-Security-Token',
  ])('redacts the value under %s', (key) => {
    expect(redactInput({ [key]: 'hunter2', other: 'x' })).toEqual({ [key]: REDACTED, other: 'x' });
  });

  it.each(['shipping', 'author', 'spinner', 'className', 'shipping_pin_code', 'spin', 'X-Amz-Date', 'X-Amz-SignedHeaders', 'signatureRequired'])('keeps the value under %s', (key) => {
    expect(redactInput({ [key]: 'visible' })).toEqual({ [key]: 'visible' });
  });

  it('redacts whole objects and arrays under secret keys, keeps null and booleans', () => {
    expect(redactInput({ credentials: { user: 'a', pass: 'b' }, tokens: ['a', 'b'], password: null, secret: false, pin: 1234 })).toEqual({
      credentials: REDACTED,
      tokens: REDACTED,
      password: null,
      secret: false,
      pin: REDACTED,
    });
  });

  it('redacts a Nango secret key (a UUID) by its key name', () => {
    const out = redactInput({ secretKey: '9f8e7d6c-5b4a-4321-8fed-cba987654321', connectionId: 'conn-1', providerConfigKey: 'shopify' });
    expect(out).toEqual({ secretKey: REDACTED, connectionId: 'conn-1', providerConfigKey: 'shopify' });
  });

  it('redacts secrets found by shape in any string', () => {
    const params = {
      path: '/admin/api/2026-07/orders.json',
      body: {
        note: 'customer card 4111-1111-1111-1111, ssn 123-45-6789',
        headers: ['Bearer abcdefgh12345678', 'shpat_0123456789abcdef0123456789abcdef'],
        lwa: 'Atza|IwEBIOrtjG3-cMo0xXr8Ab',
        jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl',
      },
    };
    const out = unchanged(params, redactInput);
    const text = json(out);
    for (const secret of ['4111', '123-45-6789', 'abcdefgh12345678', 'shpat_', 'Atza|', 'eyJ']) expect(text).not.toContain(secret);
    expect(text).toContain('/admin/api/2026-07/orders.json');
  });

  it('keeps ordinary params', () => {
    const params = {
      action: 'create',
      orderId: '12345',
      amazonOrderId: '112-0000001-1234567',
      amount: '100.00',
      note: 'Refund for a damaged item, order #1001',
      status: 'shipped',
      trackingNumber: '1Z999AA10123456784',
      workflowExecutionId: 'a1b2c3d4-0000-4c5d-8e9f-000000000003',
      email: 'jane@example.com',
      phone: '+15555550142',
      address: { address1: '742 Evergreen Terrace', zip: '97477' },
    };
    expect(unchanged(params, redactInput)).toEqual(params);
  });

  it('redacts card-shaped numbers, but not under identifier keys', () => {
    expect(redactInput({ n: 4111111111111111, id: 4111111111111111, orderId: '4111111111111111', note: '4111111111111111' })).toEqual({
      n: REDACTED,
      id: 4111111111111111,
      orderId: '4111111111111111',
      note: REDACTED,
    });
  });

  it('an identifier key exempts only a bare digit id: a card written in its text, or a card number as a key ending in _id, is redacted', () => {
    const card = '4111-1111-1111-1111';
    expect(redactInput({ customerId: `card ${card} exp 12/29`, orderId: ' 4111111111111111 ' })).toEqual({
      customerId: `card ${REDACTED} exp 12/29`,
      orderId: ' 4111111111111111 ',
    });
    expect(JSON.stringify(redactOutput({ trackingNumber: `paid with ${card.replaceAll('-', ' ')}`, sku: 'SKU 4111111111111111' }))).not.toMatch(/4111.?1111/);
    expect(JSON.stringify(redactInput({ ['4111111111111111_id']: 1 }))).not.toContain('4111111111111111');
  });

  it('pwd and passcode are secret names; a Login with Amazon client secret is recognised in text', () => {
    expect(redactInput({ pwd: 'hunter2!', userPasscode: '918273', password_hint: 'x' })).toEqual({ pwd: REDACTED, userPasscode: REDACTED, password_hint: REDACTED });
    const secret = `amzn1.oa2-cs.v1.${'3f9a1c7e'.repeat(8)}`;
    expect(redactInput({ note: `use ${secret} for the app` })).toEqual({ note: `use ${REDACTED} for the app` });
    expect(redactInput({ note: 'amzn1.application-oa2-client.0123456789abcdef is the client id' })).toEqual({
      note: 'amzn1.application-oa2-client.0123456789abcdef is the client id',
    });
  });

  it('hides the signature of GCS and Azure signed URLs, and AWS temporary, GitHub fine-grained and Google API keys, keeping the rest', () => {
    const gcs = 'https://storage.googleapis.com/b/o.pdf?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Expires=900&X-Goog-Signature=5a1b2c3d4e5f60718293a4b5c6d7e8f9';
    const azure = 'https://acct.blob.core.windows.net/c/o.pdf?sv=2024-08-04&se=2026-12-02T00%3A00%3A00Z&sr=b&sp=r&sig=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA%3D%3D';
    const out = redactOutput({ gcs, azure }) as { gcs: string; azure: string };
    expect(out.gcs).toBe(gcs.replace(/X-Goog-Signature=.*/, `X-Goog-Signature=${REDACTED}`));
    expect(out.azure).toBe(azure.replace(/sig=.*/, `sig=${REDACTED}`));
    const tokens = ['ASIAY34FZKBOKMUTVV7A', `github_pat_11ABCDEFG0123456789_${'a'.repeat(40)}`, `AIzaSyA${'b'.repeat(32)}`];
    for (const token of tokens) expect(redactInput({ note: `use ${token} here` })).toEqual({ note: `use ${REDACTED} here` });
    expect(redactInput({ note: 'ASIA is a continent; AIza is not a word' })).toEqual({ note: 'ASIA is a continent; AIza is not a word' });
  });

  it('redacts a top-level string', () => {
    expect(redactInput('Bearer abcdefgh12345678')).toBe(`Bearer ${REDACTED}`);
  });
});

describe('redactInput: credentials inside strings and name/value pairs', () => {
  it('redacts secret-named query parameters in URLs and paths, keeping the others', () => {
    const params = {
      url: 'https://api.x/v1?access_token=abcd1234secretvalue&client_secret=xyz',
      path: 'v1/x?access_token=abcd1234secretvalue',
      next: '/admin/api/2026-07/orders.json?page=2&order_id=123',
    };
    expect(unchanged(params, redactInput)).toEqual({
      url: `https://api.x/v1?access_token=${REDACTED}&client_secret=${REDACTED}`,
      path: `v1/x?access_token=${REDACTED}`,
      next: '/admin/api/2026-07/orders.json?page=2&order_id=123',
    });
  });

  it('redacts the value of a {name|key|header, value} pair whose name is secret-like, and keeps the rest', () => {
    const params = {
      headers: [
        { name: 'Authorization', value: 'Basic dXNlcjpwYXNzd29yZA==' },
        { name: 'Content-Type', value: 'application/json' },
        { key: 'X-Api-Key', value: 'k-1', type: 'text', disabled: false },
        { Header: 'Cookie', Values: ['a=1', 'b=2'] },
        { header_name: 'x-shopify-access-token', header_value: 'abcdef0123' },
        { name: 'password', value: null },
      ],
      form: [{ field: 'client_secret', val: 42 }],
      option: { name: 'Token Pack', value: '10' },
    };
    expect(unchanged(params, redactInput)).toEqual({
      headers: [
        { name: 'Authorization', value: REDACTED },
        { name: 'Content-Type', value: 'application/json' },
        { key: 'X-Api-Key', value: REDACTED, type: 'text', disabled: false },
        { Header: 'Cookie', Values: REDACTED },
        { header_name: 'x-shopify-access-token', header_value: REDACTED },
        { name: 'password', value: null },
      ],
      form: [{ field: 'client_secret', val: REDACTED }],
      option: { name: 'Token Pack', value: '10' },
    });
  });

  it('redacts the second item of a [name, value] entry whose name is secret-like, and keeps the rest', () => {
    const params = {
      headers: [
        ['X-Shopify-Access-Token', 'abcdef0123456789'],
        ['Accept', 'application/json'],
        ['api_key', 12345],
      ],
      entry: ['Authorization', 'Token abc'],
      triple: ['token', 'a', 'b'],
    };
    expect(unchanged(params, redactInput)).toEqual({
      headers: [
        ['X-Shopify-Access-Token', REDACTED],
        ['Accept', 'application/json'],
        ['api_key', REDACTED],
      ],
      entry: ['Authorization', REDACTED],
      triple: ['token', 'a', 'b'],
    });
    expect(redactInput(['Proxy-Authorization', 'Basic Zm9vOmJhcg=='])).toEqual(['Proxy-Authorization', REDACTED]);
  });

  it('redacts Authorization credentials of any scheme, and URL passwords, in free text', () => {
    const out = redactInput({
      note: 'replayed with Authorization: Basic dXNlcjpwYXNzd29yZA== and Authorization: Token abcdef0123 twice',
      dump: 'GET /x HTTP/1.1\r\nAuthorization: Digest username="ann", response="6629fae4"\r\nAccept: */*',
      dsn: 'postgres://app:s3cr3t-pw@db.internal:5432/shop',
    });
    expect(out).toEqual({
      note: `replayed with Authorization: Basic ${REDACTED} and Authorization: Token ${REDACTED} twice`,
      dump: `GET /x HTTP/1.1\r\nAuthorization: Digest ${REDACTED}\r\nAccept: */*`,
      dsn: `postgres://app:${REDACTED}@db.internal:5432/shop`,
    });
  });

  it('output redaction does the same for what a vendor echoes back', () => {
    const echoed = {
      request: { url: 'https://shop.example/api?api_key=k-0123&limit=5', headers: [{ name: 'X-Api-Key', value: 'k-0123' }, ['Cookie', 'sid=abc']] },
      error: 'rejected https://u:hunter2@shop.example (Authorization: Basic dXNlcjpodW50ZXIy)',
    };
    const text = json(unchanged(echoed, redactOutput));
    for (const secret of ['k-0123', 'sid=abc', 'hunter2', 'dXNlcjpodW50ZXIy']) expect(text).not.toContain(secret);
    expect(text).toContain('limit=5');
  });

  it('redacts secret-named headers written out in text: dumps, curl commands, JSON inside a string', () => {
    const params = {
      note: 'retried with curl -H "X-Api-Key: k-0123" -H "Cookie: sid=abc; cart=7" https://shop.example/api',
      dump: 'POST /proxy/orders HTTP/1.1\r\nX-Nango-Secret-Key: 9f8e7d6c-5b4a\r\nx-shopify-access-token: 0123abcd\r\nAccept: */*',
      body: '{"api_key":"k-0123","limit":5}',
    };
    expect(unchanged(params, redactInput)).toEqual({
      note: `retried with curl -H "X-Api-Key: ${REDACTED}" -H "Cookie: ${REDACTED}" https://shop.example/api`,
      dump: `POST /proxy/orders HTTP/1.1\r\nX-Nango-Secret-Key: ${REDACTED}\r\nx-shopify-access-token: ${REDACTED}\r\nAccept: */*`,
      body: `{"api_key":"${REDACTED}","limit":5}`,
    });
  });

  it('output redaction hides headers a vendor echoes in an error, and the signature of a presigned URL', () => {
    const vendor = {
      errors: [{ message: 'Forbidden. Request headers: x-amz-access-token: tok-0123, x-amz-date: 20260802T140511Z, Set-Cookie: session=s3cr3t; Path=/' }],
      reportDocumentId: 'amzn1.spdoc.1.4.na.0f1e2d3c',
      url: 'https://tortuga-prod-na.s3.amazonaws.com/doc.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAEXAMPLE%2F20260802%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260802T140511Z&X-Amz-Expires=300&X-Amz-Security-Token=IQoJb3JpZ2lu&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4',
    };
    const out = unchanged(vendor, redactOutput) as typeof vendor;
    const text = json(out);
    for (const secret of ['tok-0123', 's3cr3t', 'ASIAEXAMPLE', 'IQoJb3JpZ2lu', 'aeeed9bbccd4']) expect(text).not.toContain(secret);
    expect(out.errors[0]!.message).toBe(`Forbidden. Request headers: x-amz-access-token: ${REDACTED}, x-amz-date: 20260802T140511Z, Set-Cookie: ${REDACTED}`);
    expect(out.reportDocumentId).toBe('amzn1.spdoc.1.4.na.0f1e2d3c');
    expect(out.url).toBe(
      `https://tortuga-prod-na.s3.amazonaws.com/doc.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${REDACTED}&X-Amz-Date=20260802T140511Z&X-Amz-Expires=300&X-Amz-Security-Token=${REDACTED}&X-Amz-SignedHeaders=host&X-Amz-Signature=${REDACTED}`,
    );
  });

  it('keeps ordinary text with colons', () => {
    const values = {
      at: '2026-08-02T14:05:11Z',
      message: 'status: expired',
      header: 'Content-Type: application/json',
      failure: 'POST /oauth/token: 401 invalid_grant',
      option: 'Token Pack: 10 left',
      id: 'gid://shopify/Order/450789469',
      json: '{"token": null, "order_id": "123"}',
    };
    expect(unchanged(values, redactOutput)).toEqual(values);
  });

  it('property: any secret-like header name in any pair shape hides its value; ordinary headers stay', () => {
    const secretHeader = fc.constantFrom('Authorization', 'Proxy-Authorization', 'X-Api-Key', 'X-Shopify-Access-Token', 'Cookie', 'x-amz-security-token', 'client_secret', 'password');
    const plainHeader = fc.constantFrom('Content-Type', 'Accept', 'User-Agent', 'X-Request-Id', 'If-None-Match', 'page', 'order_id');
    const spelled = (name: fc.Arbitrary<string>) => name.chain((n) => fc.constantFrom(n, n.toLowerCase(), n.toUpperCase()));
    const value = fc.stringMatching(/^[a-z][a-z.-]{0,31}$/);
    const shape = fc.constantFrom<(n: string, v: string) => unknown>(
      (n, v) => ({ name: n, value: v }),
      (n, v) => ({ key: n, value: v }),
      (n, v) => ({ value: v, header: n }),
      (n, v) => [n, v],
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), spelled(secretHeader), spelled(plainHeader), value, shape), { minLength: 1, maxLength: 6 }), (rows) => {
        const headers = rows.map(([secret, s, p, v, make]) => make(secret ? s : p, v));
        const out = redactInput({ headers }) as { headers: unknown[] };
        rows.forEach(([secret, s, p, v, make], i) => {
          expect(out.headers[i]).toEqual(make(secret ? s : p, secret ? REDACTED : v));
        });
      }),
    );
  });
});

describe('redaction safety', () => {
  it('returns a fresh copy that shares nothing with the input', () => {
    const input = { a: { b: [{ c: 1 }] } };
    const out = redactInput(input) as typeof input;
    expect(out).toEqual(input);
    expect(out).not.toBe(input);
    expect(out.a).not.toBe(input.a);
    expect(out.a.b).not.toBe(input.a.b);
    expect(out.a.b[0]).not.toBe(input.a.b[0]);
  });

  it('marks cycles and copies shared references that are not cycles', () => {
    const a: Record<string, unknown> = { name: 'a', list: [] };
    a.self = a;
    (a.list as unknown[]).push(a, { up: a });
    const out = redactOutput(a);
    expect(out).toEqual({ name: 'a', list: [CIRCULAR, { up: CIRCULAR }], self: CIRCULAR });
    const shared = { k: 1 };
    expect(redactInput({ x: shared, y: shared })).toEqual({ x: { k: 1 }, y: { k: 1 } });
  });

  it('bounds depth', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 40; i++) deep = { d: deep };
    const text = json(redactInput(deep));
    expect(text).toContain(TRUNCATED);
    expect(text).not.toContain('leaf');
    let ok: unknown = 'leaf';
    for (let i = 0; i < REDACTION_LIMITS.maxDepth; i++) ok = { d: ok };
    expect(json(redactInput(ok))).toContain('leaf');
  });

  it('cuts long strings, still redacting a secret at the cut', () => {
    const long = 'x'.repeat(9_989) + ' 4111 1111 1111 1111 ' + 'y'.repeat(20_000);
    const out = redactInput({ note: long }) as { note: string };
    expect(out.note.length).toBeLessThan(10_100);
    expect(out.note.endsWith(TRUNCATED)).toBe(true);
    expect(out.note).not.toMatch(/41|1111/);
    expect(redactInput('a'.repeat(10_000))).toBe('a'.repeat(10_000));
  });

  it('cuts long arrays with a marker item', () => {
    const out = redactInput(Array.from({ length: 1_500 }, (_, i) => i)) as unknown[];
    expect(out).toHaveLength(1_001);
    expect(out[999]).toBe(999);
    expect(out[1_000]).toBe(`${TRUNCATED} 500 more items`);
  });

  it('bounds the total output size', () => {
    const big = Array.from({ length: 900 }, (_, i) => ({ i, text: 'z'.repeat(2_000) }));
    const text = json(redactOutput({ big }));
    expect(text.length).toBeLessThan(300 * 1024);
    expect(text).toContain(TRUNCATED);
    const wide = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`key${i}`, 'v'.repeat(20)]));
    expect(json(redactInput(wide)).length).toBeLessThan(300 * 1024);
  });

  it('bounds the text read, not only the copy written: texts that redact to [REDACTED] stop being read once the budget is spent', () => {
    // Each is read four times (its head, with and without the zero-width space) and recorded as 12 characters: the
    // output budget alone let 5 MB of them be read, seconds of CPU for one answer.
    const one = `sk_live_\u200babcdefghijklmnop ${'+1<'.repeat(3_700)}`;
    const out = redactOutput({ notes: Array.from({ length: 450 }, () => one) }) as { notes: string[] };
    const read = out.notes.filter((n) => n === `${REDACTED}…${TRUNCATED}`).length;
    expect(read).toBe(out.notes.length - 1);
    expect(read).toBeGreaterThan(10);
    expect(read).toBeLessThanOrEqual(Math.ceil(REDACTION_LIMITS.maxScannedChars / (4 * 10_000)) + 1);
    expect(out.notes.at(-1)).toBe(`${TRUNCATED} ${450 - read} more items`);
    expect(json(out)).not.toContain('sk_live');
    // Ordinary text is still cut by the output budget, not the read one (four times it): ~26 heads of 10,000.
    const prose = redactOutput({ notes: Array.from({ length: 450 }, () => 'plain words '.repeat(900)) }) as { notes: string[] };
    const kept = prose.notes.length - 1;
    expect(kept).toBeGreaterThanOrEqual(Math.floor(REDACTION_LIMITS.maxOutputChars / 10_020));
    expect(kept).toBeLessThanOrEqual(Math.ceil(REDACTION_LIMITS.maxOutputChars / 10_000) + 1);
  });

  it('a property name longer than any rule reads (256) is not judged: its value is recorded [REDACTED], the name cut like any text', () => {
    for (const fn of [redactInput, redactOutput]) {
      const name = 'Aé'.repeat(20_000);
      const out = fn({ [name]: 1, [`${'x'.repeat(300)}`]: 'kept?', short: 'kept' }) as Record<string, unknown>;
      const entries = Object.entries(out);
      expect(entries).toHaveLength(3);
      expect(entries[0][0].endsWith(TRUNCATED)).toBe(true);
      expect(entries[0][1]).toBe(REDACTED);
      expect(out['x'.repeat(300)]).toBe(REDACTED);
      expect(out.short).toBe('kept');
    }
    // 256 characters is still a name: judged as ever.
    expect(redactOutput({ ['n'.repeat(256)]: 'v', ['n'.repeat(250) + 'Token']: 'v' })).toEqual({ ['n'.repeat(256)]: 'v', ['n'.repeat(250) + 'Token']: REDACTED });
    // A pair's "name" that long is taken for a secret's too (its value field redacted).
    expect(redactOutput({ name: 'q'.repeat(300), value: 'v' })).toEqual({ name: 'q'.repeat(300), value: REDACTED });
  });

  it('replaces NUL in strings and keys with U+FFFD (never drops it), and repairs lone surrogates', () => {
    const out = redactInput({ 'na\u0000me': 'a\u0000b', list: ['\u0000'], bad: 'x\ud800y', pair: '😀' });
    expect(out).toEqual({ 'na\ufffdme': 'a\ufffdb', list: ['\ufffd'], bad: 'x\ufffdy', pair: '😀' });
    expect(json(out)).not.toContain('\\u0000');
  });

  it('copies __proto__ and constructor keys as plain data without touching any prototype', () => {
    const input: unknown = JSON.parse('{"__proto__": {"polluted": "yes", "token": "t"}, "constructor": {"prototype": {"polluted": "yes"}}, "a": 1}');
    for (const fn of [redactInput, redactOutput]) {
      const out = fn(input) as Record<string, unknown>;
      expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
      expect(Object.hasOwn(out, '__proto__')).toBe(true);
      expect((out as { polluted?: unknown }).polluted).toBeUndefined();
      expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
      expect(JSON.parse(json(out))).toEqual(JSON.parse('{"__proto__": {"polluted": "yes", "token": "[REDACTED]"}, "constructor": {"prototype": {"polluted": "yes"}}, "a": 1}'));
    }
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('turns non-JSON values into JSON ones', () => {
    const input = {
      when: new Date('2026-08-02T14:05:11.000Z'),
      invalid: new Date(NaN),
      big: 12345678901234567890n,
      nan: NaN,
      inf: Infinity,
      fn: () => 1,
      sym: Symbol('s'),
      undef: undefined,
      list: [undefined, () => 1],
      buf: Buffer.from('secret'),
      map: new Map([['a', 1]]),
      nullProto: Object.assign(Object.create(null) as object, { token: 'x', ok: 1 }),
    };
    expect(redactInput(input)).toEqual({
      when: '2026-08-02T14:05:11.000Z',
      invalid: null,
      big: '12345678901234567890',
      nan: null,
      inf: null,
      list: [null, null],
      buf: '[Binary]',
      map: {},
      nullProto: { token: REDACTED, ok: 1 },
    });
    expect(redactInput(undefined)).toBeNull();
    expect(redactInput(null)).toBeNull();
    expect(redactInput(7)).toBe(7);
  });

  it('survives getters that throw', () => {
    const evil = Object.defineProperty({ a: 1 }, 'b', {
      enumerable: true,
      get() {
        throw new Error('boom');
      },
    });
    expect(redactInput({ ok: 1, evil })).toEqual({ ok: 1, evil: '[Unreadable]' });
  });

  it('the injectable service gives the same answers', () => {
    const service = new RedactionService();
    expect(service.redactInput({ apiKey: 'x' })).toEqual(redactInput({ apiKey: 'x' }));
    expect(service.redactOutput({ email: 'a@b.co' })).toEqual({ email: REDACTED });
  });
});

describe('redaction: gaps a review found (each was stored or shown before)', () => {
  it('SSN and tax-id fields are redacted from params whatever their spelling and format (ARCHITECTURE.md: "SSN / tax ids")', () => {
    const params = {
      body: {
        social_security_number: '123456789',
        socialSecurityNumber: '123 45 6789',
        taxId: '123456789',
        tax_id: '98-7654321x',
        TaxIdentificationNumber: '55-1234567',
        ein: '123456789',
        national_id: 'AB123456C',
        SIN: '046454286',
        note: 'customer ssn is 219 09 9999',
      },
    };
    const out = json(redactInput(params));
    for (const v of ['123456789', '123 45 6789', '7654321', '1234567', 'AB123456C', '046454286', '219 09 9999']) expect(out, v).not.toContain(v);
    // Not every run of spaced digits: a quantity list or a card's groups are other shapes.
    expect(redactInput({ note: 'sizes 10 20 300 and 1234 56 7890 12' })).toEqual({ note: 'sizes 10 20 300 and 1234 56 7890 12' });
  });

  it.each([
    ['session', 'sess-7f3a9c1e2b'],
    ['sessionId', 's%3A7f3a9c1e2b'],
    ['JSESSIONID', '7F3A9C1E2B4D'],
    ['PHPSESSID', '7f3a9c1e2b4d'],
    ['connect.sid', 's:7f3a9c1e2b4d'],
    ['encryption_key', 'k-7f3a9c1e2b4d'],
    ['signingKey', 'k-7f3a9c1e2b4d'],
    ['master_key', 'k-7f3a9c1e2b4d'],
    ['hmac-key', 'k-7f3a9c1e2b4d'],
    ['pass', 'hunter2hunter2'],
    ['pw', 'hunter2hunter2'],
    ['ｐａｓｓｗｏｒｄ', 'hunter2hunter2'], // full-width letters read as their ASCII (NFKC)
  ])('{%j: …} is redacted', (key, value) => {
    expect(redactInput({ [key]: value })).toEqual({ [key]: REDACTED });
  });

  it('names that merely contain those letters stay (no over-redaction)', () => {
    const kept = { passengers: 2, compass: 'N', sidebar: 'left', tinted: true, einstein: 'e=mc2', sessionCount: 3, position: 'top' };
    expect(redactInput(kept)).toEqual({ ...kept, sessionCount: 3 });
  });

  it.each([
    ['a JSESSIONID cookie pair', 'JSESSIONID=7F3A9C1E2B4D; Path=/', '7F3A9C1E2B4D'],
    ['a session query parameter', '/v1/x?session=7f3a9c1e2b4d', '7f3a9c1e2b4d'],
    ['a quoted config value', 'api_key="k-7f3a9c1e2b4d"', 'k-7f3a9c1e2b4d'],
    ['a single-quoted one', "CLIENT_SECRET = 'k-7f3a9c1e2b4d'", 'k-7f3a9c1e2b4d'],
    ['a spaced assignment', 'password = hunter2hunter2', 'hunter2hunter2'],
    ['an XML element', '<auth><password>hunter2hunter2</password></auth>', 'hunter2hunter2'],
    ['a namespaced XML element with attributes', '<ns:ClientSecret type="x">k-7f3a9c1e2b4d</ns:ClientSecret>', 'k-7f3a9c1e2b4d'],
    ['a PGP private key block', '-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF0secretkeymaterial\n-----END PGP PRIVATE KEY BLOCK-----', 'lQOYBF0secretkeymaterial'],
    ['an OpenAI project key', 'key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123', 'AbCdEfGhIjKlMnOpQrStUvWx0123'],
    ['a GitLab token', 'glpat-AbCdEfGhIjKlMnOpQrSt', 'AbCdEfGhIjKlMnOpQrSt'],
    ['a SendGrid key', 'SG.AbCdEfGhIjKlMnOpQr.StUvWxYz0123456789AbCd', 'StUvWxYz0123456789AbCd'],
    ['a Stripe webhook secret', 'whsec_AbCdEfGhIjKlMnOpQrStUvWx', 'AbCdEfGhIjKlMnOpQrStUvWx'],
    ['an npm token', 'npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789', 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'],
  ])('a secret inside a string is redacted: %s', (_what, text, secret) => {
    expect(json(redactInput({ note: text }))).not.toContain(secret);
  });

  it('assignments that are not secrets, comparisons and empty values stay as written', () => {
    for (const text of ['status = "open"', 'token == null', 'password=""', '<name>Acme</name>', '<token></token>', 'retries = 3']) {
      expect(redactInput({ note: text }), text).toEqual({ note: text });
    }
    expect(redactInput({ note: 'api_key="k-7f3a9c1e2b4d" rest' })).toEqual({ note: `api_key="${REDACTED}" rest` });
    expect(redactInput({ note: '<Password a="1">x1y2z3</Password>' })).toEqual({ note: `<Password a="1">${REDACTED}</Password>` });
  });

  it('output: North American phones written with dashes or dots, and internationalised emails, are redacted', () => {
    const out = json(redactOutput({ note: 'call me at 415-555-2671 or 415.555.2671; mail info@müller.de or jöhn@exämple.com' }));
    for (const v of ['555-2671', '555.2671', 'müller.de', 'exämple.com', 'jöhn']) expect(out, v).not.toContain(v);
    // Not the dashed and dotted numbers that are not phones: an Amazon order id, a date, a version, an SSN-shaped id (redacted as one).
    const kept = { orderId: '112-0000001-1234567', date: '2026-12-01', version: '1.415.555.2671', area: '015-555-2671' };
    expect(redactOutput(kept)).toEqual(kept);
  });

  it('output: flat street fields and address-line lists keep nothing of the street; the postal code stays', () => {
    const out = redactOutput({
      Contact: { MailingStreet: '742 Evergreen Terrace', MailingPostalCode: '97477', BillingStreet: '1 Main St' },
      destination: { addressLines: ['742 Evergreen Terrace'], postalCode: '97477' },
    });
    expect(out).toEqual({
      Contact: { MailingStreet: REDACTED, MailingPostalCode: '97477', BillingStreet: REDACTED },
      destination: { addressLines: REDACTED, postalCode: '97477' },
    });
  });

  it('output: a masked card number (issuer BIN and last four) is redacted', () => {
    expect(redactOutput({ payment_method: { type: 'card', masked_pan: '424242******4242', maskedNumber: '5555 **** 4444' } })).toEqual({
      payment_method: { type: 'card', masked_pan: REDACTED, maskedNumber: REDACTED },
    });
  });

  it('Shopify order ids that pass Luhn are ids, not card numbers: in a GID, an admin URL, a note, a number', () => {
    const order = '5927413514539'; // 13 digits from 5, Luhn-valid: about one Shopify id in ten
    const kept = {
      admin_graphql_api_id: `gid://shopify/Order/${order}`,
      order_status_url: `https://acme.myshopify.com/admin/orders/${order}`,
      note: `customer asked about order ${order}`,
      total: Number(order),
      bigger: 'gid://shopify/Order/4111111111111111',
    };
    expect(redactOutput(kept)).toEqual(kept);
    expect(redactInput(kept)).toEqual(kept);
    // Only the id is exempt: a card written right after a GID (one blank or dash between) still goes.
    for (const text of [
      'Customer gid://shopify/Customer/123 4111 1111 1111 1111 wants a refund',
      'see gid://shopify/Order/5927413514539 4111111111111111',
      'see gid://shopify/Order/5927413514539-4111-1111-1111-1111',
    ]) {
      expect(json(redactInput({ note: text })), text).not.toMatch(/4111/);
      expect(json(redactOutput({ note: text })), text).not.toMatch(/4111/);
      expect(json(redactOutput({ note: text })), text).toMatch(/gid:\/\/shopify\/\w+\/\d+/);
    }
    // Cards still go, in every length their issuers use.
    for (const card of ['4222222222222', '30569309025904', '378282246310005', '4111111111111111', '6011111111111117', '3530111333300000']) {
      expect(redactInput({ note: `card ${card}` }), card).toEqual({ note: `card ${REDACTED}` });
    }
  });
});

describe('redaction: short secret words inside longer names (pass, pwd, pw, pin, otp, cvc, cvv, tax ids)', () => {
  const secretNames = [
    'card[cvc]', 'card_cvc', 'cardCvv', 'cvv_code', 'cvv2', 'CVC2', 'card_csc', 'DB_PASS', 'SMTP_PASS', 'ftpPass', 'pass1', 'MYSQL_PWD', 'smtpPwd', 'pwd_hash',
    'user_pw', 'otp_code', 'otpCode', 'OTPCode', 'userPIN', 'card_pin', 'pin_block', 'pin_code', 'pinCode', 'company_ein', 'vendor_tin', 'customer_ssn_last4',
    'boarding_pass', 'ｄｂ＿ｐａｓｓ',
  ];
  it.each(secretNames)('{%j: …} is redacted, in params and in vendor results', (key) => {
    expect(redactInput({ [key]: 'k-7f3a9c1e2b', other: 'x' })).toEqual({ [key]: REDACTED, other: 'x' });
    expect(redactOutput({ [key]: '7f3a', other: 'x' })).toEqual({ [key]: REDACTED, other: 'x' });
  });

  // Whole words only: the letters inside another word, or a fact about the secret (the verdict of a CVC check,
  // Shopify's cvv_result_code "M", Pinterest's pin_id, a code length), are not the secret.
  const keptNames = [
    'shipping', 'bypass', 'passenger', 'passengers', 'compass', 'pinned', 'pinned_at', 'spinner', 'sidebar', 'opinion', 'pinterest', 'passthrough', 'einstein',
    'tinted', 'position', 'className', 'sinceId', 'setting', 'single', 'order_id', 'shop_domain', 'tracking_number', 'postal_code', 'zip', 'city', 'account_id',
    'status', 'cvc_check', 'cvv_result_code', 'cvvResultCode', 'pin_id', 'Pinterest_pin_id', 'otp_length', 'otpEnabled', 'auth_type', 'sessionCount',
    'AccountSid', 'MessageSid', 'account_sid',
    // India's "PIN code" is its postal code: with an address word it is one; "pincode" (one word) is not the word pin.
    'shipping_pin_code', 'billingPinCode', 'delivery_pin_code', 'pincode',
  ];
  it.each(keptNames)('{%j: …} stays', (key) => {
    expect(redactInput({ [key]: 'visible' })).toEqual({ [key]: 'visible' });
  });

  it('in text: env files, YAML, a Stripe form body, a query string, XML and a {name, value} pair', () => {
    const params = {
      env: 'DB_HOST=db\nDB_PASS=hunter5x\nMYSQL_PWD=hunter6x',
      encodedEnv: 'DB_HOST=db\\nDB_PASS=hunter8x',
      yaml: 'db_pass: hunter7x\ndb_host: db',
      form: 'card[number]=4242424242424242&card[exp_month]=12&card[cvc]=333&amount=100',
      url: '/v1/verify?otp_code=918273&user=ann',
      xml: '<Card><CardCvv>321</CardCvv><Brand>visa</Brand></Card>',
      header: { name: 'X-Otp-Code', value: '564738' },
    };
    expect(redactInput(params)).toEqual({
      env: `DB_HOST=db\nDB_PASS=${REDACTED}\nMYSQL_PWD=${REDACTED}`,
      encodedEnv: `DB_HOST=db\\nDB_PASS=${REDACTED}`,
      yaml: `db_pass: ${REDACTED}\ndb_host: db`,
      form: `card[number]=${REDACTED}&card[exp_month]=12&card[cvc]=${REDACTED}&amount=100`,
      url: `/v1/verify?otp_code=${REDACTED}&user=ann`,
      xml: `<Card><CardCvv>${REDACTED}</CardCvv><Brand>visa</Brand></Card>`,
      header: { name: 'X-Otp-Code', value: REDACTED },
    });
  });

  it('in text, the same names stay where they are not the secret', () => {
    for (const text of ['shipping_pin_code=560001&passengers=2', 'cvc_check: pass', 'bypass=true', 'pinned: yes', 'compass = N']) {
      expect(redactInput({ note: text }), text).toEqual({ note: text });
    }
  });
});

/** Object.defineProperty: a "__proto__" key stays a plain key, as JSON.parse makes it. */
function paramsOf(entries: readonly (readonly [string, unknown])[]): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const [k, v] of entries) Object.defineProperty(params, k, { value: v, enumerable: true, writable: true, configurable: true });
  return params;
}

describe('redaction: what the copy shows under a name is what the vendor gets under it', () => {
  it('a key with a NUL never takes the name of the key it spells without it (the approval view showed amount "1", the vendor got "5000")', () => {
    for (const params of [JSON.parse('{"amount":"5000","amou\\u0000nt":"1"}'), JSON.parse('{"amou\\u0000nt":"1","amount":"5000"}')] as Record<string, unknown>[]) {
      const out = redactInput({ body: params }) as { body: Record<string, unknown> };
      expect(out.body).toEqual({ amount: '5000', 'amou\ufffdnt': '1' });
    }
  });

  it('two keys recorded alike keep both values, and a key sent as written keeps its own name', () => {
    // "a\0b" is recorded as "a\uFFFDb", which is also a key as sent: that one keeps the name.
    expect(redactInput(paramsOf([['a\u0000b', 1], ['a\ufffdb', 2], ['a\ufffdb (2)', 3]]))).toEqual({ 'a\ufffdb': 2, 'a\ufffdb (2)': 3, 'a\ufffdb (3)': 1 });
    // Keys that are secrets are redacted; the redacted names do not overwrite one another.
    const out = redactInput(paramsOf([['Bearer abcdefgh1234', 'one'], ['Bearer zyxwvuts9876', 'two'], ['Bearer [REDACTED]', 'three']])) as Record<string, unknown>;
    expect(json(out)).not.toMatch(/abcdefgh|zyxwvuts/);
    expect(Object.values(out).sort()).toEqual(['one', 'three', 'two']);
    expect(out['Bearer [REDACTED]']).toBe('three');
    // The marker of an exhausted budget does not overwrite a member named like it.
    const wide = paramsOf([['[Truncated]', 'real'], ...Array.from({ length: 40_000 }, (_, i) => [`key${i}`, 'v'.repeat(20)] as const)]);
    const cut = redactInput(wide) as Record<string, unknown>;
    expect(cut['[Truncated]']).toBe('real');
    expect(cut['[Truncated] (2)']).toBe(true);
  });

  it('a NUL key is still matched as the secret name it spells', () => {
    expect(redactInput({ 'pass\u0000word': 'hunter2', headers: [{ name: 'Author\u0000ization', value: 'Basic dXNlcjpwYXNz' }] })).toEqual({
      'pass\ufffdword': REDACTED,
      headers: [{ name: 'Author\ufffdization', value: REDACTED }],
    });
  });

  it('text with a NUL is shown with U+FFFD where the NUL was; a secret a NUL splits is still hidden', () => {
    expect(redactInput({ amount: '5\u0000000' })).toEqual({ amount: '5\ufffd000' });
    // Redaction around a NUL that does not touch it: the NUL stays visible, the card goes.
    const note = (redactInput({ note: 'call\u0000back, card 4111 1111 1111 1111' }) as { note: string }).note;
    expect(note).toMatch(/^call\ufffdback, card /);
    expect(note).not.toContain('1111');
    // A NUL inside the secret: without it the text is a card / a Stripe key, which the vendor may well read.
    for (const text of ['41111111\u000011111111', 'key sk_live_abcdef\u0000ghijklmnop', 'card 4111 1111\u0000 1111 1111 and 5\u0000000']) {
      expect(redactInput({ note: text }), JSON.stringify(text)).toEqual({ note: REDACTED });
    }
    expect(redactOutput({ note: 'mail jane.doe@exam\u0000ple.com' })).toEqual({ note: REDACTED });
  });

  it('property: distinct keys stay distinct, and a name recorded as sent holds the value sent under it (or [REDACTED])', () => {
    const piece = fc.constantFrom('amount', 'to', 'a', '\u0000', '\ufffd', '\ud800', ' (2)', '[Truncated]', 'token', 'Bearer abcdefgh12', '__proto__', '');
    const key = fc.oneof(fc.array(piece, { maxLength: 3 }).map((p) => p.join('')), fc.string({ maxLength: 6 }));
    fc.assert(
      fc.property(fc.uniqueArray(key, { maxLength: 8 }), (keys) => {
        const params = paramsOf(keys.map((k, i) => [k, `v${i}`]));
        for (const fn of [redactInput, redactOutput]) {
          const out = fn(params) as Record<string, unknown>;
          const label = JSON.stringify(keys);
          expect(Object.keys(out), label).toHaveLength(keys.length);
          for (const k of keys) if (Object.hasOwn(out, k)) expect([params[k], REDACTED], label).toContain(out[k]);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('redaction: the output budget holds for what PostgreSQL prints', () => {
  /** The copy's length as jsonb text comes back from PostgreSQL: every number written out in full. */
  function printedLength(value: unknown): number {
    let extra = 0;
    const text = JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === 'number') extra += jsonbNumberLength(v) - JSON.stringify(v).length;
      return v;
    });
    return text.length + extra;
  }

  it('32 × 1000 × 1e308 (192 KB of JSON, 9.9 MB printed in full) is cut to the budget', () => {
    const params = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`p${i}`, Array.from({ length: 1_000 }, () => 1e308)]));
    expect(printedLength(params)).toBeGreaterThan(9_000_000);
    for (const fn of [redactInput, redactOutput]) {
      const out = fn(params);
      // The budget is rough (separators are not counted), as in 'bounds the total output size' above.
      expect(printedLength(out)).toBeLessThan(300 * 1024);
      expect(json(out)).toContain(TRUNCATED);
    }
    // Tiny numbers print long too: 5e-324 is "0.000…5", 326 characters.
    expect(printedLength(redactInput({ xs: Array.from({ length: 1_000 }, () => [5e-324]) }))).toBeLessThan(300 * 1024);
  });

  it('ordinary numbers cost what they did: 1000 of them are all kept', () => {
    const xs = Array.from({ length: 1_000 }, (_, i) => i * 1.25);
    expect(redactInput({ a: xs, b: xs, c: xs })).toEqual({ a: xs, b: xs, c: xs });
  });
});
