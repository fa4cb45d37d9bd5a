import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/redaction/redaction.service.js';
import { call, eventsOf, rowOf } from '../executor/support.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

const ALLOW_WRITES = [{ id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' }];

/**
 * Identity data (Onfido, Veriff, Google People), phones under other names or in national format (MessageBird, Vonage,
 * CRM notes) and addresses in QuickBooks and Pipedrive shapes, sent through the gateway to the emulator's Nango
 * upstream, which echoes a GET's query and a POST's body: what the ledger row, its events, the ops detail view, the CSV
 * export and the expert's approval view hold. The model still gets every value whole; order ids, tracking numbers,
 * ZIP+4 codes, times and timestamps stay.
 */
describe('redaction: provider personal data in what the gateway stores and shows', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.get', 'nango_proxy.post'], vendors: ['nango'], rules: ALLOW_WRITES });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The row, and everything stored or shown about the call as one text: row, events, ops detail view, CSV export. */
  async function stored(input: Record<string, unknown>): Promise<{ result: unknown; row: Record<string, unknown>; all: string }> {
    const res = await call(h, org, 'nango_proxy', input);
    expect(res.body.status, JSON.stringify(res.body).slice(0, 400)).toBe('succeeded');
    const id = res.body.toolCallId as string;
    const row = await rowOf(h, id);
    const events = await eventsOf(h, id);
    const detail = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(org.adminKey));
    expect(detail.status).toBe(200);
    const csv = await h.t.http.get(`/v1/tool-calls/export?format=csv&runId=${org.runId}`).set(bearer(org.adminKey)).buffer(true);
    expect(csv.status).toBe(200);
    expect(csv.text).toContain(id);
    return { result: res.body.result, row, all: [JSON.stringify(row), JSON.stringify(events), JSON.stringify(detail.body), csv.text].join('\n') };
  }

  it('identity numbers, MRZ lines, dates and places of birth go from input and output; the model gets them whole', async () => {
    const body = {
      applicant: { id: 'a1', first_name: 'Jane', dob: '1990-01-01', id_numbers: [{ type: 'ssn', value: '123456789' }] },
      report: {
        name: 'document',
        result: 'clear',
        properties: {
          document_type: 'passport',
          document_numbers: [{ type: 'document_number', value: '999228775' }],
          mrz_line1: 'P<GBRDOE<<JANE<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<',
          mrz_line2: '9992287750GBR9001011F3001019<<<<<<<<<<<<<<04',
        },
      },
      verification: { id: 'f04bdb47', status: 'approved', person: { placeOfBirth: 'MADRID' }, document: { number: 'MORGA753116SM9IJ', type: 'DRIVERS_LICENSE' } },
      person: { resourceName: 'people/c1', birthdays: [{ date: { year: 1967, month: 3, day: 30 }, text: '03/30/1967' }] },
      invoice: { document: { type: 'invoice', number: 'INV-1001' }, discount: { type: 'percentage', value: 15 } },
    };
    const { result, row, all } = await stored({ action: 'post', path: '/v3.6/applicants', body });
    expect(JSON.stringify(result)).toContain('123456789');
    expect(JSON.stringify(result)).toContain('MORGA753116SM9IJ');
    for (const pii of ['123456789', '1990-01-01', '999228775', 'GBRDOE<<JANE', '9992287750GBR', 'MORGA753116SM9IJ', 'MADRID', '03/30/1967', '"year":1967']) {
      expect.soft(all, pii).not.toContain(pii);
    }
    const input = (row.input_redacted as { body: typeof body }).body;
    // params keep the first name (names are an output rule) and the type of each number
    expect(input.applicant).toEqual({ id: 'a1', first_name: 'Jane', dob: REDACTED, id_numbers: [{ type: 'ssn', value: REDACTED }] });
    const output = (row.output_redacted as { received: typeof body }).received;
    expect(output.report.properties.document_numbers).toEqual([{ type: 'document_number', value: REDACTED }]);
    expect(output.verification).toEqual({ id: 'f04bdb47', status: 'approved', person: { placeOfBirth: REDACTED }, document: { number: REDACTED, type: 'DRIVERS_LICENSE' } });
    // an invoice is no identity document, a discount's {type, value} no identity number
    expect(output.invoice).toEqual(body.invoice);
    expect(input.invoice).toEqual(body.invoice);
  });

  it("the expert's approval view does not show an SSN sent as {type, value}", async () => {
    const o = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    const expert = await createKey(h.t, o.orgId, 'expert');
    const res = await call(h, o, 'nango_proxy', { action: 'post', path: '/v3.6/applicants', body: { first_name: 'Jane', id_numbers: [{ type: 'ssn', value: '123456789' }] } });
    expect(res.body.status, JSON.stringify(res.body).slice(0, 300)).toBe('waiting_approval');
    const list = await h.t.http.get('/v1/approvals?status=pending&kind=expert').set(bearer(expert.key));
    const approval = (list.body.items as { id: string; toolCallId: string }[]).find((a) => a.toolCallId === res.body.toolCallId)!;
    const view = await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key));
    expect(view.status).toBe(200);
    expect(view.body.inputRedacted).toMatchObject({ body: { first_name: 'Jane', id_numbers: [{ type: 'ssn', value: REDACTED }] } });
    expect(JSON.stringify(view.body)).not.toContain('123456789');
  });

  it('phones under msisdn, contactNumber, tel_no, *_format_number or in national format go from output; ids, times and codes stay', async () => {
    const get = await stored({ action: 'get', path: '/v2/ni/standard', query: { msisdn: '447700900123', contactNumber: '07911 123456', tel_no: '020 7946 0958', page: '2' } });
    expect((get.row.output_redacted as { query: unknown }).query).toEqual({ msisdn: REDACTED, contactNumber: REDACTED, tel_no: REDACTED, page: '2' });
    const body = {
      contact: { id: 'c1', msisdn: 31612345678 },
      insight: { status: 0, international_format_number: '447700900456', national_format_number: '07700 900456', country_code: 'GB' },
      note: 'Customer asked to be called back on 07911 654321 or 030 12345678',
      kept: {
        orderId: '114-0000003-0000003',
        trackingNumber: '1Z999AA10123456784',
        zip: '02134-1234',
        hours: 'open 0800-1700',
        ref: '015-555-2671',
        at: '2026-12-05T08:58:39.192Z',
        cep: '01310-100',
      },
    };
    const post = await stored({ action: 'post', path: '/contacts', body });
    expect(JSON.stringify(post.result)).toContain('07911 654321');
    const output = (post.row.output_redacted as { received: typeof body }).received;
    expect(output).toEqual({
      contact: { id: 'c1', msisdn: REDACTED },
      insight: { status: 0, international_format_number: REDACTED, national_format_number: REDACTED, country_code: 'GB' },
      note: `Customer asked to be called back on ${REDACTED} or ${REDACTED}`,
      kept: body.kept,
    });
    for (const phone of ['31612345678', '447700900456', '07700 900456', '07911 654321', '030 12345678']) {
      expect.soft(JSON.stringify(post.row.output_redacted), phone).not.toContain(phone);
    }
  });

  it('QuickBooks BillAddr and Pipedrive address_* fields keep only the postal code', async () => {
    const body = {
      Customer: {
        Id: '1',
        CompanyName: 'Bird Sanctuary',
        BillAddr: { Id: '2', Line1: '4581 Finch St.', City: 'Bayshore', CountrySubDivisionCode: 'CA', PostalCode: '94326', Lat: '37.4307709', Long: '-122.1385727' },
      },
      person: { id: 7, address_street_number: '12', address_route: 'Musterweg', address_locality: 'Berlin', address_postal_code: '10115', address_id: 3 },
    };
    const { row, all } = await stored({ action: 'post', path: '/v3/company/1/customer', body });
    const output = (row.output_redacted as { received: typeof body }).received;
    expect(output.Customer).toEqual({ Id: '1', CompanyName: 'Bird Sanctuary', BillAddr: { PostalCode: '94326' } });
    expect(output.person).toEqual({
      id: 7,
      address_street_number: REDACTED,
      address_route: REDACTED,
      address_locality: REDACTED,
      address_postal_code: '10115',
      address_id: 3,
    });
    // addresses are an output rule: the params, as sent, keep them
    expect((row.input_redacted as { body: unknown }).body).toEqual(body);
    expect(all).toContain('94326');
  });
});
