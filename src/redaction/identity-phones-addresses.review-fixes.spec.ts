/**
 * What a review of the identity / national phone / address rules found over- and under-redacted, and what the fixes
 * must still hide: KYC check outcomes, codes in text, address metadata, network "…Addr" names, national mobiles,
 * prefixed address parts, WhatsApp wa_id and metafield pairs.
 */
import { describe, expect, it } from 'vitest';
import { isAddressContainer, isFlatAddressPart } from './address-keys.js';
import { redactContactsInText } from './contacts-in-text.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { isIdentityDataName, isIdentityKind, isIdentityPairName, isKycSafeLeaf, isPhoneKey } from './personal-keys.js';
import { normalizeKey } from './redaction-keys.js';
import { redactInput, redactOutput } from './redaction.service.js';

describe('F1 KYC check outcomes stay; the identity data under the same names goes', () => {
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

describe('F3 codes in text in a national phone shape stay', () => {
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

describe('F4 / F7 flat address parts: known parts as whole words, any prefix; not metadata', () => {
  it('keeps timestamps and facts about an address, and the postal code', () => {
    const row = { address_updated_at: '2026-12-05T09:00:00Z', addressed_at: '2026-12-05T09:00:00Z', address_source: 'geocoder', address_confidence: 0.9, address_postal_code: '10115' };
    expect(redactOutput(row)).toEqual(row);
  });

  it('hides prefixed parts (home_address_route, billing_address_city, postal_address_locality), keeps their postal codes', () => {
    const row = { home_address_route: 'Main Street', billing_address_city: 'Berlin', postal_address_locality: 'Berlin', billing_address_postal_code: '10115', homeAddressZip: '10115' };
    expect(redactOutput(row)).toEqual({ home_address_route: REDACTED, billing_address_city: REDACTED, postal_address_locality: REDACTED, billing_address_postal_code: '10115', homeAddressZip: '10115' });
  });

  it.each([
    ['address_route', true],
    ['address_admin_area_level_2', true],
    ['address_sublocality_level_1', true],
    ['address_formatted_address', true],
    ['address_lat', true],
    ['home_address_route', true],
    ['billingAddressCity', true],
    ['shipping_address_line1', true],
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

describe('F5 "…Addr": postal only by a known name or by what it holds', () => {
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

describe('F6 national mobiles in text: Dutch, French, UK unspaced', () => {
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

describe('minor: WhatsApp wa_id, metafield pairs named passport_*', () => {
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
