import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';

/**
 * Ids are not personal data: a UUID, a W3C trace id, a hex digest goes into the ledger, the request log and the call's
 * story as written. A tax id's shape (12-3456789) sits inside one UUID in about 500 (its fourth group ending in two
 * digits, its last starting with seven), and was cut out of it: the request log of GET /v1/runs/:id named another path.
 */
describe('ids shown as written', () => {
  const uuids = [
    '09cbb655-36e5-442e-9c27-5750688bc97a', // the run id whose request log line lost its middle in CI
    '222082f9-04b9-4829-bd84-3352724ccb57',
    '96C977C0-CD3D-452F-BC70-2811742F83CB',
    '00000000-2702-8318-8000-0000a0000000', // 2702 8318 8000 0000 passes Luhn, its last group glued to letters
  ];

  it.each(uuids)('the UUID %s, alone, in a path and in a vendor answer', (id) => {
    expect(redactInput(id)).toBe(id);
    expect(redactInput(`/v1/runs/${id}/tool-calls`)).toBe(`/v1/runs/${id}/tool-calls`);
    expect(redactOutput({ account: { id }, note: `workflow ${id} done` })).toEqual({ account: { id }, note: `workflow ${id} done` });
  });

  it('a traceparent whose trace id starts with seven digits', () => {
    const traceparent = '00-6519826cd8b38973f18e359b98dea64c-74c2914da6fbd2c7-01';
    expect(redactInput({ headers: { traceparent } })).toEqual({ headers: { traceparent } });
    expect(redactOutput({ traceparent })).toEqual({ traceparent });
  });

  it('a hex digest that starts with a Luhn-valid run of digits', () => {
    for (const digest of ['4277058878950ef2cb3451747fe8c6e2', '40661008457849247ac3005eafcafa9cb6ef021e']) {
      expect(redactInput(digest)).toBe(digest);
      expect(redactOutput({ digest })).toEqual({ digest });
    }
  });

  it('a ULID whose first two letters and check digits would pass as an IBAN of no country or another length', () => {
    for (const ulid of ['GE627K7Z6GBMVMCF331VCJGGQP', 'NZ34Q5MNBJTNGX12G25WB2HB89', 'PC47WKBXFS4C52D93B0RKPJ1W2', 'FD47E59CHCJ8XX35SMA97Q49MS']) {
      expect(redactOutput({ id: ulid })).toEqual({ id: ulid });
      expect(redactOutput({ note: `event ${ulid} replayed` })).toEqual({ note: `event ${ulid} replayed` });
    }
  });

  it('an IBAN of each registry length still goes (the registry examples, 20 to 33 characters)', () => {
    const ibans = 'AL47212110090000000235698741 AD1200012030200359100100 AT611904300234573201 AZ21NABZ00000000137010001944 BH67BMAG00001299123456 BR1800360305000010009795493C1 CH9300762011623852957 CR05015202001026284066 EG380019000500000000263180002 IS140159260076545510730339 TR330006100519786457841326 UA213223130000026007233566001 SA0380000000608010167519 QA58DOHB00001234567890ABCDEFG MU17BOMM0101101030300200000MUR SC18SSCB11010000000000001497USD LC55HEMM000100010012001200023015 RU0304452522540817810538091310419 MT84MALT011000012345MTLCAST001S NI45BAPR00000013000003558124 JO94CBJO0010000000000131000302 KW81CBKU0000000000001234560101 PS92PALS000000000400123456702';
    for (const iban of ibans.split(' ')) {
      expect(redactOutput({ note: `refund to ${iban} today` }), iban).toEqual({ note: `refund to ${REDACTED} today` });
      const grouped = iban.replace(/(.{4})(?!$)/g, '$1 ');
      // Grouped, a run of its digit groups that is also a card's may go first as a card: the account goes either way.
      const out = (redactOutput({ note: `refund to ${grouped} today` }) as { note: string }).note;
      expect(out, grouped).toMatch(/^refund to (?:[A-Z]{2}\d{2}(?: [A-Z0-9]{4})? )?\[REDACTED\]/);
      expect(out, grouped).not.toContain(grouped.slice(10));
    }
  });

  it('any UUID (property)', () => {
    fc.assert(
      fc.property(fc.uuid(), (id) => redactInput(id) === id && (redactOutput({ id }) as { id: string }).id === id),
      { numRuns: 20_000, seed: 20261207 },
    );
  });

  it('a tax id written as one still goes', () => {
    for (const text of ['EIN 12-3456789.', 'ssn: 123-45-6789,', '(12-3456789)', 'line\\n12-3456789', 'EIN 12-3456789_']) {
      expect(redactInput(text), text).not.toMatch(/3456789|45-6789/);
      expect(redactOutput({ text }), text).not.toEqual({ text });
    }
    expect(redactOutput({ note: 'EIN 12-3456789 on file' })).toEqual({ note: `EIN ${REDACTED} on file` });
  });

  it('a card number written as one still goes, before letters too when a separator ends it', () => {
    expect(redactOutput({ note: 'card 4111 1111 1111 1111 exp 12/29' })).toEqual({ note: `card ${REDACTED} exp 12/29` });
    expect(redactOutput({ note: 'card 4111-1111-1111-1111-x9' })).toEqual({ note: `card ${REDACTED}-x9` });
    expect(redactOutput({ note: 'paid with 4111111111111111.' })).toEqual({ note: `paid with ${REDACTED}.` });
  });
});
