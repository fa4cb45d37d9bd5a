import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonbNumberLength } from '../../src/common/storable-text.js';
import { REDACTION_LIMITS, TRUNCATED } from '../../src/redaction/redaction.service.js';
import { LEDGER_OUTPUT_MAX_BYTES, storedJsonBytes, type TruncatedLedgerOutput } from '../../src/tool-calls/ledger-output-cap.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * jsonb keeps a number as an exact decimal and prints every digit: "1e308" (6 bytes of a request) comes back
 * from PostgreSQL as 309 characters on every read of the row. The sizes that bound what is stored (the
 * redaction budget of input_redacted, the 16 KiB of run metadata) count numbers as PostgreSQL prints them.
 */
describe('jsonb numbers are measured as PostgreSQL prints them', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: ['shopify'] });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('jsonbNumberLength is the length PostgreSQL prints', async () => {
    const fixed = [0, -0, 1, -1, 0.1, 1e21, -1e21, 1e308, -1.7976931348623157e308, 5e-324, 1.5e-7, 1e-7, 123.456, 6.02214076e23, 2 ** 53, 1.2345e-5];
    const sampled = fc.sample(fc.double({ noNaN: true, noDefaultInfinity: true }), { numRuns: 500, seed: 7 });
    const numbers = [...fixed, ...sampled];
    const [{ lengths }] = (await h.t.ds.query(
      'SELECT array_agg(length(e::text) ORDER BY i) AS lengths FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, i)',
      [JSON.stringify(numbers)],
    )) as [{ lengths: number[] }];
    numbers.forEach((n, i) => expect(jsonbNumberLength(n), String(n)).toBe(lengths[i]));
  });

  it('a tool_use of 32 × 1000 × 1e308 (192 KB) is recorded within the redaction budget as PostgreSQL returns it (it was 9.9 MB)', async () => {
    const arr = `[${Array.from({ length: 1_000 }, () => '1e308').join(',')}]`;
    const extra = Array.from({ length: 32 }, (_, i) => `"p${i}":${arr}`).join(',');
    const text = `{"type":"tool_use","id":"toolu_jsonb_e308","name":"order_lookup","input":{"action":"lookup","orderId":"12345",${extra}}}`;
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ ...bearer(org.agentKey), 'Content-Type': 'application/json' }).send(text);
    expect(res.status, res.text.slice(0, 300)).toBe(422); // unknown params: recorded as INVALID_INPUT
    const id = res.body.toolCallId as string;
    const [{ chars }] = (await h.t.ds.query('SELECT length(input_redacted::text) AS chars FROM tool_calls WHERE id = $1', [id])) as [{ chars: number }];
    // PostgreSQL writes ", " between items, which the rough budget does not count: a few percent over.
    expect(chars).toBeLessThan(REDACTION_LIMITS.maxOutputChars * 1.05);
    const story = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(ops));
    expect(story.status).toBe(200);
    expect(story.text.length).toBeLessThan(REDACTION_LIMITS.maxOutputChars * 1.05);
    expect(JSON.stringify(story.body.inputRedacted)).toContain(TRUNCATED);
    expect(story.body.inputRedacted).toMatchObject({ orderId: '12345' });
  });

  it('run metadata: 16 KiB is counted as PostgreSQL prints it, so 12 KB of 1e308 (620 KB printed) is refused; ordinary numbers pass', async () => {
    const big = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send(`{"specialistId":"support","metadata":{"xs":[${Array.from({ length: 2_000 }, () => '1e308').join(',')}]}}`).set('Content-Type', 'application/json');
    expect(big.status, big.text.slice(0, 200)).toBe(400);
    expect(big.body.code).toBe('VALIDATION_FAILED');
    const ordinary = { xs: Array.from({ length: 1_500 }, (_, i) => i * 1.5), big: 1e21, small: 1.5e-7 };
    const ok = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support', metadata: ordinary });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.metadata).toEqual(ordinary);
  });

  it('storedJsonBytes is what octet_length(output_redacted::text) counts', async () => {
    const fixed = [{ readings: Array<number>(50).fill(1e308) }, [5e-324, -1.5e-7, 1e21, 0, -0, 12.5], { s: 'a,b:c "1e+308" \\ \n é 😀', t: true, f: false, n: null, o: {}, a: [] }];
    const sampled = fc.sample(fc.jsonValue({ stringUnit: 'grapheme' }), { numRuns: 300, seed: 11 });
    const texts = [...fixed, ...sampled].map((v) => JSON.stringify(v)).filter((t) => !t.includes('\\u0000'));
    const [{ sizes }] = (await h.t.ds.query(
      'SELECT array_agg(octet_length(t::jsonb::text) ORDER BY i) AS sizes FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i)',
      [texts],
    )) as [{ sizes: number[] }];
    texts.forEach((t, i) => expect(storedJsonBytes(t, Buffer.byteLength(t)), t.slice(0, 200)).toBe(sizes[i]));
  });

  it('a vendor answer of 800 × 1e308 (5.6 KB of JSON, 249 KB as jsonb) is kept in the ledger as a stub within 64 KiB', async () => {
    const nangoOrg = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    const body = { readings: Array<number>(800).fill(1e308) };
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, body, times: 1 });
    const res = await h.t.http.post(`/v1/runs/${nangoOrg.runId}/tool-calls`).set(bearer(nangoOrg.agentKey)).send({ type: 'tool_use', id: 'toolu_e308_out', name: 'nango_proxy', input: { action: 'get', path: 'v1/readings' } });
    expect(res.body).toMatchObject({ status: 'succeeded', result: body });
    const [row] = (await h.t.ds.query('SELECT octet_length(output_redacted::text) AS n, output_redacted AS o FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { n: number; o: TruncatedLedgerOutput }[];
    expect(row.n).toBeLessThanOrEqual(LEDGER_OUTPUT_MAX_BYTES);
    expect(row.o).toMatchObject({ truncated: true, bytes: Buffer.byteLength(JSON.stringify(body)) });
  });
});
