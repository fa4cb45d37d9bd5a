import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOL_CALL_VIEW_FIELDS } from '../../src/tool-calls/tool-call.view.js';
import { ALL_TEST_SECRETS } from '../support/secrets.js';
import { parseCsv } from '../support/csv.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

/** The text a row's value has in a CSV cell: text that starts like a spreadsheet formula gets a leading `'`. */
const cellOf = (v: unknown): string =>
  v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : typeof v === 'string' && /^[=+\-@\t\r]/.test(v) ? `'${v}` : String(v);
/** A vendor error text that a spreadsheet would run as a command (OWASP's CSV-injection example). */
const FORMULA_TEXT = "=cmd|' /C calc'!A0";

describe('GET /v1/tool-calls/export', () => {
  let t: TestApp;
  let org: string;
  let ops: string;
  /** Every row the list endpoint returns, in order. */
  let listed: Record<string, unknown>[];

  async function list(query: Record<string, string>): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.http.get('/v1/tool-calls').query({ ...query, limit: '200', ...(cursor ? { cursor } : {}) }).set(bearer(ops));
      expect(res.status).toBe(200);
      out.push(...(res.body.items as Record<string, unknown>[]));
      cursor = res.body.nextCursor as string | null;
    } while (cursor);
    return out;
  }

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Exporter');
    ops = (await createKey(t, org, 'ops')).key;
    const run = await insertRun(t.ds, org);
    // 1,234 rows: more than two export batches. The pipeline stores only redacted input and output; the raw
    // secrets below were never written anywhere, so they must not come out either.
    await insertCalls(
      t.ds,
      Array.from({ length: 1234 }, (_, i) => ({
        orgId: org,
        runId: run,
        status: i % 4 === 0 ? 'failed' : 'succeeded',
        errorCode: i % 4 === 0 ? 'VENDOR_ERROR' : null,
        errorText: i % 8 === 4 ? FORMULA_TEXT : i % 4 === 0 ? 'vendor said "no", twice,\r\nthen gave up' : null,
        createdAt: microsAfterEpoch2026(Math.floor(i / 3) * 1_000 + (i % 3)),
        inputRedacted: { orderId: String(1000 + i), accessToken: '[REDACTED]', card: '[REDACTED]' },
        outputRedacted: { email: '[REDACTED]', zip: '94107', note: 'line1\nline2, "quoted"' },
      })),
    );
    listed = await list({});
    expect(listed).toHaveLength(1234);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('streams NDJSON: the list endpoint’s rows, same order, one ToolCall per line', async () => {
    const res = await t.http.get('/v1/tool-calls/export').query({ format: 'ndjson' }).set(bearer(ops)).buffer(true).parse((r, cb) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (text += c));
      r.on('end', () => cb(null, text));
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
    expect(res.headers['content-disposition']).toContain('tool-calls.ndjson');
    const text = res.body as string;
    expect(text.endsWith('\n')).toBe(true);
    const rows = text.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toEqual(listed);
  });

  it('streams CSV: a header of the ToolCall field names, then the same rows with proper quoting', async () => {
    const res = await t.http.get('/v1/tool-calls/export').query({ format: 'csv' }).set(bearer(ops)).buffer(true).parse((r, cb) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (text += c));
      r.on('end', () => cb(null, text));
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const [header, ...rows] = parseCsv(res.body as string);
    expect(header).toEqual([...TOOL_CALL_VIEW_FIELDS]);
    expect(rows).toHaveLength(listed.length);
    rows.forEach((cells, i) => {
      expect(cells).toEqual(TOOL_CALL_VIEW_FIELDS.map((f) => cellOf(listed[i][f])));
    });
    const failed = rows.find((r) => r[header.indexOf('status')] === 'failed')!;
    expect(failed[header.indexOf('errorText')]).toBe('vendor said "no", twice,\r\nthen gave up');
    expect(JSON.parse(failed[header.indexOf('outputRedacted')])).toEqual({ email: '[REDACTED]', zip: '94107', note: 'line1\nline2, "quoted"' });
    const formulas = rows.filter((r) => r[header.indexOf('errorText')].includes('cmd|'));
    expect(formulas).toHaveLength(listed.filter((r) => r.errorText === FORMULA_TEXT).length);
    expect(formulas.length).toBeGreaterThan(100);
    for (const r of formulas) expect(r[header.indexOf('errorText')]).toBe(`'${FORMULA_TEXT}`);
  });

  it('applies the list filters and contains nothing unredacted', async () => {
    const expected = await list({ status: 'failed', until: listed[100].createdAt as string });
    const res = await t.http.get('/v1/tool-calls/export').query({ format: 'ndjson', status: 'failed', until: listed[100].createdAt as string }).set(bearer(ops));
    const text = res.text;
    const ids = text.trimEnd().split('\n').map((l) => (JSON.parse(l) as { id: string }).id);
    expect(ids).toEqual(expected.map((r) => r.id));
    for (const format of ['csv', 'ndjson']) {
      const all = (await t.http.get('/v1/tool-calls/export').query({ format }).set(bearer(ops))).text;
      expect(all).toContain('[REDACTED]');
      for (const secret of ALL_TEST_SECRETS) expect(all).not.toContain(secret);
      expect(all).not.toMatch(/tool_call_results|ciphertext|auth_tag/);
    }
  });

  it('pages past rows dated BC: each row once (not back to the newest, forever)', async () => {
    const era = await createOrg(t, 'Era export');
    const eraOps = (await createKey(t, era, 'ops')).key;
    const run = await insertRun(t.ds, era);
    // 600 rows over a batch (500) in the year 3000 BC, a CHECK-valid value plain SQL can write, and 3 of today.
    const bc = Array.from({ length: 600 }, (_, i) => ({ orgId: era, runId: run, createdAt: `3000-01-01T00:${String(Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.000000Z BC` }));
    const calls = await insertCalls(t.ds, [...bc, ...Array.from({ length: 3 }, () => ({ orgId: era, runId: run }))]);
    const expected = ((await t.ds.query(`SELECT id FROM tool_calls WHERE org_id = $1 ORDER BY created_at DESC, id DESC`, [era])) as { id: string }[]).map((r) => r.id);
    expect(expected).toHaveLength(calls.length);
    // A batch ending on a BC row whose position read as the same date AD started again from the newest row: read
    // no further than a few rows past the end, so a looping export fails here instead of streaming without end.
    const res = await t.http.get('/v1/tool-calls/export').query({ format: 'ndjson' }).set(bearer(eraOps)).buffer(true).parse((r, cb) => {
      let text = '';
      let done = false;
      const finish = (): void => {
        if (!done) cb(null, text.slice(0, text.lastIndexOf('\n') + 1)); // whole lines only
        done = true;
      };
      r.setEncoding('utf8');
      r.on('data', (c: string) => {
        text += c;
        if (text.split('\n').length > expected.length + 10) {
          finish();
          (r as unknown as IncomingMessage).destroy(); // supertest types it as a Response; it is the node stream
        }
      });
      r.on('end', finish);
    });
    expect(res.status).toBe(200);
    const ids = (res.body as string).trimEnd().split('\n').map((l) => (JSON.parse(l) as { id: string }).id);
    expect(ids).toEqual(expected);
  });

  it('the list pages past rows dated BC with its cursor: each row once, in order', async () => {
    const era = await createOrg(t, 'Era list');
    const eraOps = (await createKey(t, era, 'ops')).key;
    const run = await insertRun(t.ds, era);
    const bc = Array.from({ length: 3 }, (_, i) => ({ orgId: era, runId: run, createdAt: `3000-01-01T00:00:0${i}.000000Z BC` }));
    await insertCalls(t.ds, [...bc, { orgId: era, runId: run }]);
    const expected = ((await t.ds.query(`SELECT id FROM tool_calls WHERE org_id = $1 ORDER BY created_at DESC, id DESC`, [era])) as { id: string }[]).map((r) => r.id);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 4; page++) {
      const r = await t.http.get('/v1/tool-calls').query({ limit: 2, ...(cursor ? { cursor } : {}) }).set(bearer(eraOps));
      expect(r.status).toBe(200);
      seen.push(...(r.body.items as { id: string }[]).map((i) => i.id));
      cursor = (r.body.nextCursor as string | null) ?? undefined;
      if (!cursor) break;
    }
    expect(seen).toEqual(expected);
    expect(cursor).toBeUndefined();
  });

  it('validates before streaming: bad format, unknown parameters, other orgs', async () => {
    for (const query of [{}, { format: 'xml' }, { format: 'csv', limit: '5' }, { format: 'csv', runId: 'x' }]) {
      const r = await t.http.get('/v1/tool-calls/export').query(query).set(bearer(ops));
      expect(r.status, JSON.stringify(query)).toBe(400);
      expect(r.headers['content-type']).toMatch(/problem\+json/);
    }
    const other = await createOrg(t, 'Not yours');
    const r = await t.http.get('/v1/tool-calls/export').query({ format: 'csv', orgId: other }).set(bearer(ops));
    expect(r.status).toBe(404);
    const empty = await t.http.get('/v1/tool-calls/export').query({ format: 'csv', status: 'running' }).set(bearer(ops));
    expect(empty.status).toBe(200);
    expect(empty.text).toBe(`${TOOL_CALL_VIEW_FIELDS.join(',')}\r\n`);
  });
});
