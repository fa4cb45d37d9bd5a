import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOL_CALL_VIEW_FIELDS } from '../../src/tool-calls/tool-call.view.js';
import { parseCsv } from '../support/csv.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

/**
 * outputRedacted is "any JSON value" (OpenAPI): a Nango call whose upstream answers text/plain records the text as a
 * jsonb string (nango.handler.ts). Written raw, a string and the JSON value it spells were the same CSV cell: a reader
 * could not tell the array [1,2] from the text "[1,2]", or the number 5 from the text "5". Each cell is its JSON text.
 */
describe('CSV export: outputRedacted cells keep the JSON value', () => {
  let t: TestApp;
  let ops: string;
  const values: unknown[] = [[1, 2], '[1,2]', 5, '5', { a: 1 }, '{"a":1}'];

  beforeAll(async () => {
    t = await startTestApp();
    const org = await createOrg(t, 'csv json cells');
    ops = (await createKey(t, org, 'ops')).key;
    const run = await insertRun(t.ds, org);
    await insertCalls(t.ds, values.map((v, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(i), outputRedacted: v, correlationId: `csvjson-${i}` })));
  });
  afterAll(async () => {
    await t?.close();
  });

  it('NDJSON keeps the six distinct values; CSV gives six distinct outputRedacted cells', async () => {
    const nd = await t.http.get('/v1/tool-calls/export').query({ format: 'ndjson' }).set(bearer(ops)).buffer(true).parse((res, cb) => {
      let s = ''; res.setEncoding('utf8'); res.on('data', (c: string) => (s += c)); res.on('end', () => cb(null, s));
    });
    expect(nd.status).toBe(200);
    const ndValues = (nd.body as string).trimEnd().split('\n').map((l) => (JSON.parse(l) as { outputRedacted: unknown }).outputRedacted);
    expect(new Set(ndValues.map((v) => JSON.stringify(v))).size).toBe(6); // the ledger holds six different values

    const csv = await t.http.get('/v1/tool-calls/export').query({ format: 'csv' }).set(bearer(ops)).buffer(true).parse((res, cb) => {
      let s = ''; res.setEncoding('utf8'); res.on('data', (c: string) => (s += c)); res.on('end', () => cb(null, s));
    });
    expect(csv.status).toBe(200);
    const [header, ...rows] = parseCsv(csv.body as string);
    expect(header).toEqual([...TOOL_CALL_VIEW_FIELDS]);
    const col = header.indexOf('outputRedacted');
    const cells = rows.map((r) => r[col]);
    // Each cell, read back as JSON (what "objects as JSON cells" invites), should give the value the ledger holds.
    const readBack = cells.map((c) => { try { return JSON.stringify(JSON.parse(c)); } catch { return `<not JSON: ${c}>`; } });
    expect(readBack).toEqual(ndValues.map((v) => JSON.stringify(v)));
  });
});
