/**
 * Identity data, phones under other names or in national format, and addresses in QuickBooks and Pipedrive shapes:
 * what a privacy review found stored in clear (ARCHITECTURE.md §Security). Each rule with the values it must leave alone.
 */
import { describe, expect, it } from 'vitest';
import { isAddressContainer, isFlatAddressPart, looksLikeAddress } from './address-keys.js';
import { redactContactsInText } from './contacts-in-text.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { isIdentityDataName, isIdentityKind, isIdentityPairName, isKycSafeLeaf, isPhoneKey } from './personal-keys.js';
import { normalizeKey } from './redaction-keys.js';
import { redactInput, redactOutput } from './redaction.service.js';

describe('identity data (KYC): {type, value} pairs, identity documents, MRZ, dates and places of birth', () => {
  it('an SSN given as Onfido {type: "ssn", value} goes from params (an input rule) and from output; the type stays', () => {
    const params = { applicant: { first_name: 'Jane', id_numbers: [{ type: 'ssn', value: '123456789' }, { type: 'tax_id', value: 'DE123' }] } };
    const expected = { first_name: 'Jane', id_numbers: [{ type: 'ssn', value: REDACTED }, { type: 'tax_id', value: REDACTED }] };
    expect(redactInput(params)).toEqual({ applicant: expected });
    expect(redactOutput(params)).toEqual({ applicant: { ...expected, first_name: REDACTED } });
    // never the value handed to the model
    expect(params.applicant.id_numbers[0]!.value).toBe('123456789');
  });

  it.each([
    ['kind', 'passport'],
    ['kind', 'social_insurance'],
    ['id_type', 'national_identity_card'],
    ['idType', 'DRIVING_LICENCE'],
    ['type', 'identity_card'],
    ['type', 'residence_permit'],
    ['type', 'document_number'],
    ['type', 'date_of_birth'],
  ])('a pair whose %s is %s hides its value, in params and output', (typeKey, kind) => {
    const pair = { [typeKey]: kind, value: 'X1234567' };
    expect(redactInput({ ids: [pair] })).toEqual({ ids: [{ [typeKey]: kind, value: REDACTED }] });
    expect(redactOutput({ ids: [pair] })).toEqual({ ids: [{ [typeKey]: kind, value: REDACTED }] });
  });

  it('keeps the {type, value} pairs that are no identity: discounts, metafields, counts by channel or card brand', () => {
    const facts = {
      discount_applications: [{ type: 'discount_code', value: '10.0', value_type: 'percentage', code: 'SUMMER' }],
      adjustments: [{ type: 'percentage', value: 15 }, { kind: 'sale', value: '19.99' }],
      metafields: [{ namespace: 'custom', key: 'color', type: 'single_line_text_field', value: 'red' }],
      ordersByChannel: [{ type: 'email', value: 532 }, { type: 'mobile', value: 1204 }],
      paymentsByBrand: [{ type: 'visa', value: 1234 }],
      shipping: [{ kind: 'tracking_number', value: '1Z999AA10123456784' }],
    };
    expect(redactInput(facts)).toEqual(facts);
    expect(redactOutput(facts)).toEqual(facts);
  });

  it('output: Onfido document_numbers and MRZ lines, Veriff document.number and person.placeOfBirth, Google birthdays', () => {
    const out = redactOutput({
      report: {
        name: 'document',
        result: 'clear',
        properties: {
          document_type: 'passport',
          document_numbers: [{ type: 'document_number', value: '999228775' }],
          mrz_line1: 'P<GBRDOE<<JANE<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<',
          mrzLine2: '9992287750GBR9001011F3001019<<<<<<<<<<<<<<04',
        },
      },
      verification: {
        id: 'f04bdb47',
        status: 'approved',
        person: { firstName: 'SARAH', placeOfBirth: 'MADRID', yearOfBirth: 1967 },
        document: { number: 'MORGA753116SM9IJ', type: 'DRIVERS_LICENSE', country: 'GB' },
      },
      person: { resourceName: 'people/c1', birthdays: [{ date: { year: 1967, month: 3, day: 30 }, text: '03/30/1967' }] },
      applicant: { document_numbers: ['999228775'], idNumbers: [{ type: 'other', value: 'AB123' }] },
    });
    expect(out).toEqual({
      report: {
        name: 'document',
        result: 'clear',
        properties: { document_type: 'passport', document_numbers: [{ type: 'document_number', value: REDACTED }], mrz_line1: REDACTED, mrzLine2: REDACTED },
      },
      verification: {
        id: 'f04bdb47',
        status: 'approved',
        person: { firstName: REDACTED, placeOfBirth: REDACTED, yearOfBirth: REDACTED },
        document: { number: REDACTED, type: 'DRIVERS_LICENSE', country: REDACTED },
      },
      // walked in KYC mode: every value under birthdays goes, the shape stays
      person: { resourceName: 'people/c1', birthdays: [{ date: { year: REDACTED, month: REDACTED, day: REDACTED }, text: REDACTED }] },
      applicant: { document_numbers: [REDACTED], idNumbers: [{ type: 'other', value: REDACTED }] },
    });
  });

  it('a name/value pair that names identity data hides its value in params too; a phone pair only in output', () => {
    const attributes = [{ name: 'Date of birth', value: '1990-01-01' }, { name: 'Phone', value: '5555550142' }, { name: 'gift_wrap', value: 'yes' }];
    expect(redactInput({ note_attributes: attributes })).toEqual({
      note_attributes: [{ name: 'Date of birth', value: REDACTED }, { name: 'Phone', value: '5555550142' }, { name: 'gift_wrap', value: 'yes' }],
    });
    expect(redactOutput({ note_attributes: attributes })).toEqual({
      note_attributes: [{ name: 'Date of birth', value: REDACTED }, { name: 'Phone', value: REDACTED }, { name: 'gift_wrap', value: 'yes' }],
    });
  });

  it('params lose identity data but keep names and contacts (output-only rules)', () => {
    const params = {
      applicant: { first_name: 'Jane', email: 'jane@example.com', dob: '1990-01-01', placeOfBirth: 'MADRID', mrz: 'P<GBR…' },
      document: { type: 'passport', number: '999228775' },
    };
    expect(redactInput(params)).toEqual({
      applicant: { first_name: 'Jane', email: 'jane@example.com', dob: REDACTED, placeOfBirth: REDACTED, mrz: REDACTED },
      document: { type: 'passport', number: REDACTED },
    });
  });

  it('a document that is no identity document keeps its number, title and validity: an invoice, a quote, a Google Doc, Stripe files', () => {
    const documents = {
      document: { type: 'invoice', number: 'INV-1001', title: 'Invoice 1001', validUntil: '2026-12-31', country: 'GB' },
      documents: [{ documentId: '1', name: 'Contract.pdf', number: 'Q-77' }, { kind: 'license_agreement', number: 'LA-1' }],
      verification: { status: 'verified', document: { front: 'file_1Ab', back: 'file_2Cd', details: null } },
    };
    expect(redactOutput(documents)).toEqual(documents);
    expect(redactInput(documents)).toEqual(documents);
  });

  it.each(['dob', 'date_of_birth', 'birthdays', 'placeOfBirth', 'yearOfBirth', 'mrz_line1', 'MRZ', 'passportNo', 'drivingLicenceNumber', 'document_number', 'id_number'])(
    'takes %s for identity data by its name',
    (key) => {
      expect(isIdentityDataName(key, normalizeKey(key))).toBe(true);
    },
  );

  it.each(['birthdayRewardPoints', 'birthdate_verified_at', 'passport_status', 'passportRequired', 'driver_name', 'identity_provider', 'document_type', 'summary'])(
    'does not take %s for identity data by its name',
    (key) => {
      expect(isIdentityDataName(key, normalizeKey(key))).toBe(false);
    },
  );

  it('isIdentityKind: identity kinds yes; contact, brand and discount kinds no', () => {
    for (const kind of ['passport', 'drivers_license', 'ID_CARD', 'national_id', 'mrz', 'date_of_birth']) expect(isIdentityKind(kind), kind).toBe(true);
    for (const kind of ['email', 'phone', 'visa', 'percentage', 'fixed_amount', 'other', 'identity_verification', 'home']) expect(isIdentityKind(kind), kind).toBe(false);
  });
});

describe('phones under other names, and written in national format', () => {
  it.each(['msisdn', 'MSISDN', 'contactNumber', 'contact_no', 'tel_no', 'TelNumber', 'landline', 'whatsapp', 'international_format_number', 'national_format_number'])(
    '%s names a phone',
    (key) => {
      expect(isPhoneKey(normalizeKey(key))).toBe(true);
    },
  );

  it.each(['contactId', 'contact_count', 'telemetry', 'hotel', 'cellular', 'number_format', 'whatsapp_template', 'format_number_of_decimals'])('%s does not', (key) => {
    expect(isPhoneKey(normalizeKey(key))).toBe(false);
  });

  it('output: msisdn as a JSON number, Vonage *_format_number, contactNumber and tel_no; the rest of the record stays', () => {
    const out = redactOutput({
      contact: { id: 'c1', msisdn: 31612345678, createdDatetime: '2026-12-05T08:58:39Z' },
      insight: { status: 0, international_format_number: '447700900456', national_format_number: '07700 900456', country_code: 'GB', request_id: 'aaaaaaaa-bbbb' },
      query: { contactNumber: '07911 123456', tel_no: '020 7946 0958', page: '2' },
    });
    expect(out).toEqual({
      contact: { id: 'c1', msisdn: REDACTED, createdDatetime: '2026-12-05T08:58:39Z' },
      insight: { status: 0, international_format_number: REDACTED, national_format_number: REDACTED, country_code: 'GB', request_id: 'aaaaaaaa-bbbb' },
      query: { contactNumber: REDACTED, tel_no: REDACTED, page: '2' },
    });
  });

  it.each([
    ['a UK mobile', 'called back on 07911 654321 today', `called back on ${REDACTED} today`],
    ['a London number in three groups', 'office 020 7946 0958.', `office ${REDACTED}.`],
    ['a Berlin number', 'oder 030 12345678', `oder ${REDACTED}`],
    ['a German number with a slash', 'Tel. 030/12345678', `Tel. ${REDACTED}`],
    ['after "Tel:"', 'Tel:07911 123456', `Tel:${REDACTED}`],
    ['a dashed UK number', '0161-496-0000', REDACTED],
    ['a Japanese mobile', '090-1234-5678', REDACTED],
    ['an Australian mobile', '0412 345 678', REDACTED],
    ['in JSON inside a string', '{"tel":"07911 123456"}', `{"tel":"${REDACTED}"}`],
  ])('redacts %s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
  });

  it.each([
    ['a US ZIP+4 starting with 0', 'Boston MA 02134-1234'],
    ['a 3-3-4 id with an area code no NANP phone has', 'ref 015-555-2671'],
    ['a time range', 'open 0800-1700'],
    ['a Japanese postal code', '〒060-0001'],
    ['a Brazilian CEP', 'CEP 01310-100'],
    ['an Amazon order id', '114-0000003-0000003'],
    ['an Amazon order id starting with 0', '026-1234567-1234567'],
    ['a UPS tracking number', '1Z999AA10123456784'],
    ['a tracking reference', 'TRACK-001'],
    ['an ISO timestamp', '2026-12-05T08:58:39.192Z'],
    ['a date', '2026-01-05 and 05/01/2026'],
    ['a zero-padded reference', '0012-3456-7890'],
    ['a version', 'v0.123.45678'],
    ['an ISBN', 'ISBN 0-306-40615-2'],
    ['a longer run of groups', 'acct 0123 4567 8901 2345'],
    ['a group after another', 'ids 12 0123 456789'],
    ['a number without a separator', 'order 07911123456'],
    ['an amount', '0,99 € and 0.99 USD'],
    ['too few digits', 'ext 012 3456'],
    ['too many digits', '0123 45678901'],
  ])('leaves %s', (_what, text) => {
    expect(redactContactsInText(text)).toBe(text);
  });

  it('a code in a national phone shape stays under an identifier key (SKU, tracking number, id), or alone as a value; in a sentence it goes', () => {
    const codes = { sku: '0201-123456', trackingNumbers: ['0123 456789'], partId: '0800 1234567', barcode: '0123/4567890' };
    expect(redactOutput(codes)).toEqual(codes);
    expect(redactContactsInText('0201-123456', { nationalPhones: false })).toBe('0201-123456');
    expect(redactContactsInText('%2B44%207911%20123456', { nationalPhones: false })).toBe(REDACTED);
    // A value that is only the number is as often a tracking number (Shopify's trackingInfo.number), a tag or a reference.
    expect(redactOutput({ reference: '0201-123456', trackingInfo: [{ number: '01234 567890' }], note: 'call me on 0201-123456', sku: 'call +44 7911 123456' })).toEqual({
      reference: '0201-123456',
      trackingInfo: [{ number: '01234 567890' }],
      note: `call me on ${REDACTED}`,
      sku: `call ${REDACTED}`,
    });
  });

  it('params keep a national phone (contact details are an output rule)', () => {
    expect(redactInput({ note: 'call 07911 654321', msisdn: '447700900123' })).toEqual({ note: 'call 07911 654321', msisdn: '447700900123' });
  });

  it('costs what prose does on long runs of trunk-0 groups', () => {
    const hostile = ['0123 ', '0123-', '01234/', '0123 4567 ', '07911 1234567 '].map((unit) => unit.repeat(2_000));
    expectNoWorseThanProse(hostile, redactContactsInText);
  });
});

describe('addresses: QuickBooks …Addr, lat/long and ids, Pipedrive flat address_* fields', () => {
  it('QuickBooks BillAddr and ShipAddr keep only the postal code; the customer around them stays', () => {
    const addr = { Id: '2', Line1: '4581 Finch St.', City: 'Bayshore', CountrySubDivisionCode: 'CA', PostalCode: '94326', Lat: '37.4307709', Long: '-122.1385727' };
    expect(redactOutput({ Customer: { Id: '1', CompanyName: 'Bird Sanctuary', BillAddr: addr, ShipAddr: addr, billing_addr: '1 Main St' } })).toEqual({
      Customer: { Id: '1', CompanyName: 'Bird Sanctuary', BillAddr: { PostalCode: '94326' }, ShipAddr: { PostalCode: '94326' }, billing_addr: REDACTED },
    });
  });

  it('an address under an unrelated key with its own id and lat/long is still an address', () => {
    expect(looksLikeAddress(['Id', 'Line1', 'City', 'CountrySubDivisionCode', 'PostalCode', 'Lat', 'Long'])).toBe(true);
    expect(redactOutput({ Location: { Id: '2', Line1: '4581 Finch St.', City: 'Bayshore', PostalCode: '94326', Lat: '37.43', Long: '-122.13' } })).toEqual({
      Location: { PostalCode: '94326' },
    });
  });

  it('keeps what only looks alike: a place with lat/long but no street, a lead with a street among other fields, network addresses', () => {
    expect(looksLikeAddress(['id', 'name', 'lat', 'lng'])).toBe(false);
    expect(looksLikeAddress(['Id', 'Company', 'Status', 'Street', 'PostalCode'])).toBe(false);
    const kept = { store: { id: 's1', name: 'Downtown', lat: 37.77, lng: -122.41 }, device: { macAddr: '00:1B:44:11:3A:B7', hwaddr_kind: 'ether' } };
    expect(redactOutput(kept)).toEqual(kept);
    expect(redactOutput({ ipAddr: '203.0.113.7', emailAddr: 'jane@example.com' })).toEqual({ ipAddr: REDACTED, emailAddr: REDACTED });
  });

  it('a Pipedrive person: every flat address_* part goes but the postal code and the facts about the address', () => {
    const person = {
      id: 7,
      address_street_number: '12',
      address_route: 'Musterweg',
      address_subpremise: '3. OG',
      address_locality: 'Berlin',
      address_admin_area_level_1: 'Berlin',
      address_country: 'Germany',
      address_formatted_address: 'Musterweg 12, 10115 Berlin',
      address_postal_code: '10115',
      address_id: 99,
      address_type: 'home',
      address_verified: true,
      addresses_count: 2,
      open_deals_count: 1,
    };
    const parts = ['address_street_number', 'address_route', 'address_subpremise', 'address_locality', 'address_admin_area_level_1', 'address_country', 'address_formatted_address'];
    expect(redactOutput({ person })).toEqual({ person: { ...person, ...Object.fromEntries(parts.map((part) => [part, REDACTED])) } });
    // params keep them: addresses are an output rule
    expect(redactInput({ person })).toEqual({ person });
  });

  it.each([
    ['address_route', true],
    ['addressStreetNumber', true],
    ['address_admin_area_level_2', true],
    ['address_sublocality_level_1', true],
    ['address_formatted_address', true],
    ['address_lat', true],
    ['home_address_route', true],
    ['billingAddressCity', true],
    ['shipping_address_line1', true],
    ['address_zip', false],
    ['address_postcode', false],
    ['addressId', false],
    ['address_type', false],
    ['addresses', false],
    ['address', false],
    ['email_address', false],
    ['address_updated_at', false],
    ['addressed_at', false],
    ['address_source', false],
    ['address_confidence', false],
    ['address_postal_code', false],
    ['email_address_country', false],
    ['ip_address_city', false],
  ])('isFlatAddressPart(%s) is %s', (key, expected) => {
    expect(isFlatAddressPart(normalizeKey(key))).toBe(expected);
  });
});

describe('values in a national phone shape that are codes, not phones', () => {
  it("Shopify's trackingInfo.number (no identifier key) keeps the tracking number", () => {
    const order = {
      name: '#1042',
      fulfillments: [
        {
          status: 'SUCCESS',
          trackingInfo: [
            { number: '01234 567890', company: 'GLS', url: 'https://gls-group.eu/track/01234567890' },
            { number: '06-12345678', company: 'PostNL' },
            { number: '07123456789', company: 'Royal Mail' },
          ],
        },
      ],
    };
    expect(redactOutput(order)).toEqual(order);
  });

  it('a Stripe metadata ref, a Shopify tag and a shipping line code keep their code; a batch or lot label in text keeps it too', () => {
    const payload = {
      charge: { id: 'ch_1', amount: 1000, currency: 'gbp', status: 'succeeded', metadata: { order_id: '1042', ref: '0201-123456' } },
      order: { tags: ['vip', '0201 123456'], shipping_lines: [{ title: 'Express', code: '0201 123456' }], note: 'Batch 0201/123456, lot 0123 456789' },
    };
    expect(redactOutput(payload)).toEqual(payload);
    // A phone in a sentence still goes.
    expect(redactOutput({ note: 'call back on 07911 654321 or 06 12 34 56 78' })).toEqual({ note: `call back on ${REDACTED} or ${REDACTED}` });
  });

  it('a document record whose type merely mentions identity (identity_check) is no identity document', () => {
    const doc = { document: { type: 'identity_check', created_at: '2026-12-05T09:00:00Z', status: 'complete' } };
    expect(redactInput(doc)).toEqual(doc);
    expect(redactOutput(doc)).toEqual(doc);
    const card = { document: { type: 'identity_card', number: 'X1234567', created_at: '2026-12-05T09:00:00Z' } };
    expect(((redactOutput(card) as Record<string, unknown>).document as Record<string, unknown>).number).toBe(REDACTED);
  });
});

describe('KYC check outcomes stay; the identity data under the same names goes', () => {
  const breakdown = {
    mrz: { result: 'clear', properties: {} },
    document_numbers: { result: 'consider', properties: {} },
    date_of_birth: { result: 'clear', properties: {} },
    document_expiration: { result: 'clear', properties: {} },
  };

  it('an Onfido data_validation breakdown is kept whole, in params and output', () => {
    const report = { breakdown: { data_validation: { result: 'consider', breakdown } } };
    expect(redactOutput(report)).toEqual(report);
    expect(redactInput(report)).toEqual(report);
  });

  it('the values under those names still go: a number, an MRZ line, a date of birth, as scalars, lists or records', () => {
    const data = {
      document_numbers: [{ type: 'document_number', value: '999228775' }, '123456789'],
      mrz: 'P<GBRDOE<<JANE<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<',
      mrz_line2: '9992287750GBR9001011F3001019<<<<<<<<<<<<<<04',
      mrzData: { first: 'P<GBRDOE<<JANE', second: '9992287750GBR', result: 'clear' },
      date_of_birth: { day: 1, month: 1, year: 1990 },
      dob: '1990-01-01',
      passport: { number: '999228775', type: 'P', expiry: '2030-01-01' },
      document_number: { value: 'X1234567', status: 'ok' },
    };
    const expected = {
      document_numbers: [{ type: 'document_number', value: REDACTED }, REDACTED],
      mrz: REDACTED,
      mrz_line2: REDACTED,
      mrzData: { first: REDACTED, second: REDACTED, result: 'clear' },
      date_of_birth: { day: REDACTED, month: REDACTED, year: REDACTED },
      dob: REDACTED,
      passport: { number: REDACTED, type: 'P', expiry: REDACTED },
      document_number: { value: REDACTED, status: 'ok' },
    };
    expect(redactInput(data)).toEqual(expected);
    // output also hides a passport record whole, by the account / document number rule
    expect(redactOutput(data)).toEqual({ ...expected, passport: REDACTED });
  });

  it('facts about an MRZ stay as facts about a passport do; the zone itself does not', () => {
    const facts = { mrzStatus: 'ok', mrz_check: 'clear', mrz_result: 'clear', passportStatus: 'ok' };
    expect(redactInput(facts)).toEqual(facts);
    expect(redactOutput(facts)).toEqual(facts);
    for (const key of ['mrz', 'MRZ', 'mrz_line1', 'mrzLine2', 'mrzText']) expect(isIdentityDataName(key, normalizeKey(key)), key).toBe(true);
    for (const key of ['mrzStatus', 'mrz_check', 'mrz_result', 'MrzChecks']) expect(isIdentityDataName(key, normalizeKey(key)), key).toBe(false);
    expect(isKycSafeLeaf('result')).toBe(true);
  });
});

describe('codes in text in a national phone shape stay', () => {
  it.each([
    ['a URL query value', 'see https://shop.example/orders?ref=0201-123456'],
    ['a form value', 'order=0201-123456&page=2'],
    ['an order name', '#0201-123456'],
    ['a SKU in a memo', 'SKU 0201-123456 x2'],
    ['an invoice number', 'invoice 0123/456789'],
    ['a reference', 'Ref: 0201-123456'],
    ['an order number', 'Order No. 0201 1234567'],
    ['an id', 'id 07911123456'],
    ['two US ZIPs', 'Deliver to ZIPs 02134 02139 only'],
  ])('leaves %s', (_what, text) => {
    expect(redactContactsInText(text)).toBe(text);
  });

  it('a phone after other words, or after "tel. no", still goes', () => {
    expect(redactContactsInText('call 0201-123456')).toBe(`call ${REDACTED}`);
    expect(redactContactsInText('Tel. no. 07911 123456')).toBe(`Tel. no. ${REDACTED}`);
    expect(redactContactsInText('phone no 07911 123456')).toBe(`phone no ${REDACTED}`);
    expect(redactContactsInText('noted: 07911 123456')).toBe(`noted: ${REDACTED}`);
    expect(redactContactsInText('SKU 12, call 07911 123456')).toBe(`SKU 12, call ${REDACTED}`);
    expect(redactContactsInText('https://x.example/cb?phone=07911-123456&ref=0201-123456')).toBe(`https://x.example/cb?phone=${REDACTED}&ref=0201-123456`);
    expect(redactContactsInText('tel=07911123456')).toBe(`tel=${REDACTED}`);
  });
});

describe('flat address parts: known parts as whole words, any prefix; not metadata', () => {
  it('keeps timestamps and facts about an address, and the postal code', () => {
    const row = { address_updated_at: '2026-12-05T09:00:00Z', addressed_at: '2026-12-05T09:00:00Z', address_source: 'geocoder', address_confidence: 0.9, address_postal_code: '10115' };
    expect(redactOutput(row)).toEqual(row);
  });

  it('hides prefixed parts (home_address_route, billing_address_city, postal_address_locality), keeps their postal codes', () => {
    const row = { home_address_route: 'Main Street', billing_address_city: 'Berlin', postal_address_locality: 'Berlin', billing_address_postal_code: '10115', homeAddressZip: '10115' };
    expect(redactOutput(row)).toEqual({ home_address_route: REDACTED, billing_address_city: REDACTED, postal_address_locality: REDACTED, billing_address_postal_code: '10115', homeAddressZip: '10115' });
  });
});

describe('"…Addr": postal only by a known name or by what it holds', () => {
  it('keeps server and bind addresses and QuickBooks WebAddr', () => {
    const v = { serverAddr: 'db.internal:5432', bindAddr: '0.0.0.0:8080', WebAddr: { URI: 'https://acme.example' }, remote_addr: '10.0.0.1' };
    expect(redactOutput(v)).toEqual(v);
  });

  it('QuickBooks postal Addr names and an unknown …Addr that holds an address keep only the postal code', () => {
    const addr = { Id: '2', Line1: '4581 Finch St.', City: 'Bayshore', PostalCode: '94326' };
    expect(redactOutput({ BillAddr: addr, ShipFromAddr: addr, CustomerCommunicationAddr: addr, OfficeAddr: addr, legal_addr: '1 Main St' })).toEqual({
      BillAddr: { PostalCode: '94326' },
      ShipFromAddr: { PostalCode: '94326' },
      CustomerCommunicationAddr: { PostalCode: '94326' },
      OfficeAddr: { PostalCode: '94326' },
      legal_addr: REDACTED,
    });
    for (const key of ['serverAddr', 'bindAddr', 'WebAddr', 'macAddr', 'remoteAddr']) expect(isAddressContainer(normalizeKey(key)), key).toBe(false);
  });
});

describe('national mobiles in text: Dutch, French, UK unspaced', () => {
  it.each([
    ['a Dutch mobile', 'call 06-12345678', `call ${REDACTED}`],
    ['a Dutch mobile spaced', 'bel 06 12345678', `bel ${REDACTED}`],
    ['a French mobile in pairs', 'call 06 12 34 56 78', `call ${REDACTED}`],
    ['a French number with dots', 'tél. 01.23.45.67.89', `tél. ${REDACTED}`],
    ['a French number with dashes', '06-12-34-56-78', REDACTED],
    ['a UK mobile unspaced', 'call 07911123456', `call ${REDACTED}`],
    ['a UK mobile unspaced in JSON', '{"tel":"07911123456"}', `{"tel":"${REDACTED}"}`],
  ])('redacts %s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
  });

  it.each([
    ['a longer digit run', 'acct 079111234567'],
    ['part of a word', 'X07911123456'],
    ['after an order label', 'order 07911123456'],
    ['after a SKU label', 'SKU 06-12345678'],
    ['a longer run of pairs', '06 12 34 56 78 90'],
    ['pairs after a number', '12 06 12 34 56 78'],
    ['a date', '06.12.2026'],
    ['too few digits', '06-123456'],
  ])('leaves %s', (_what, text) => {
    expect(redactContactsInText(text)).toBe(text);
  });

  it('not under an identifier key, nor in params', () => {
    expect(redactOutput({ sku: '07911123456', itemId: '06 12 34 56 78' })).toEqual({ sku: '07911123456', itemId: '06 12 34 56 78' });
    expect(redactInput({ note: 'call 06 12 34 56 78' })).toEqual({ note: 'call 06 12 34 56 78' });
  });

  it('costs what prose does on long runs of pairs and unspaced digits', () => {
    const hostile = ['06 12 ', '06.', '07911123456 ', 'SKU 0201-123456 '].map((unit) => unit.repeat(2_000));
    expectNoWorseThanProse(hostile, redactContactsInText);
  });
});

describe('WhatsApp wa_id, metafield pairs named passport_*', () => {
  it('wa_id is a phone (output)', () => {
    expect(isPhoneKey(normalizeKey('wa_id'))).toBe(true);
    expect(isPhoneKey(normalizeKey('waId'))).toBe(true);
    const body = { contacts: [{ input: '+447911123456', wa_id: '447911123456' }], messages: [{ id: 'wamid.HBgM' }] };
    expect(redactOutput(body)).toEqual({ contacts: [{ input: REDACTED, wa_id: REDACTED }], messages: [{ id: 'wamid.HBgM' }] });
  });

  it('a metafield passport_color keeps its value in params; passport_number and passport_no pairs do not', () => {
    const metafields = [
      { key: 'passport_color', value: 'navy' },
      { key: 'passport_number', value: '999228775' },
      { key: 'passport_no', value: '999228775' },
      { name: 'Driving licence number', value: 'MORGA753116SM9IJ' },
    ];
    const expected = [
      { key: 'passport_color', value: 'navy' },
      { key: 'passport_number', value: REDACTED },
      { key: 'passport_no', value: REDACTED },
      { name: 'Driving licence number', value: REDACTED },
    ];
    expect(redactInput({ metafields })).toEqual({ metafields: expected });
    // output hides any passport* name, a property's or a pair's, by the document number rule (isAccountNumberName)
    expect(redactOutput({ metafields })).toEqual({ metafields: [{ key: 'passport_color', value: REDACTED }, ...expected.slice(1)] });
    for (const name of ['passport', 'passportNo', 'drivers_license', 'passport_card', 'mrz', 'dob']) expect(isIdentityPairName(name), name).toBe(true);
    for (const name of ['passport_color', 'passport_status', 'passport_photo_url']) expect(isIdentityPairName(name), name).toBe(false);
    expect(isIdentityKind('passport_color')).toBe(false);
  });
});

describe('output walker: the postal code an address keeps is still scanned', () => {
  // An address keeps its postal code only, but that string is text like any other: a secret or a card number in the
  // zip must not reach the ledger raw (nothing pinned it until a mutation review returned the zip unscanned).
  it('a provider token or a card number in an address zip is redacted; a real zip is kept', () => {
    const token = 'shpat_0123456789abcdef0123456789abcdef';
    const out = JSON.stringify(redactOutput({ shipping_address: { address1: '1 Main St', city: 'Springfield', zip: `token ${token}` } }));
    expect(out).not.toContain(token);
    const card = JSON.stringify(redactOutput({ billing_address: { address1: '2 Side St', zip: '4111 1111 1111 1111' } }));
    expect(card).not.toContain('4111 1111 1111 1111');
    expect(redactOutput({ shipping_address: { address1: '1 Main St', zip: '90210' } })).toEqual({ shipping_address: { zip: '90210' } });
  });
});
