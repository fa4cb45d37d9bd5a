import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { exportOverHttp10, exportOverHttp11 } from './export-http.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

/**
 * An export whose database fails after its first batch (500 rows) must never look complete (README "Export"). Over
 * HTTP/1.1 the chunked body stops without its last chunk. Over HTTP/1.0 — nginx's default proxy_http_version — a body
 * ends only by the connection's close, so the abort looked exactly like a whole file of 500 rows (export review): there
 * the file now ends with a line saying it is incomplete.
 */
describe('an export cut short by the database', () => {
  let t: TestApp;
  let ops: string;
  let port: number;
  const ROWS = 1200;
  beforeAll(async () => {
    t = await startTestApp();
    const org = await createOrg(t, 'Export Midway Co');
    ops = (await createKey(t, org, 'ops')).key;
    port = (t.app.getHttpServer().address() as AddressInfo).port;
    const run = await insertRun(t.ds, org);
    await insertCalls(t.ds, Array.from({ length: ROWS }, (_, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(i) })));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  /** Runs `work` with every export page query after the first failing as a statement timeout would. */
  async function failingAfterFirstPage<T>(work: () => Promise<T>): Promise<T> {
    const ds = t.ds as unknown as { query: (sql: string, params?: unknown[]) => Promise<unknown> };
    const original = ds.query.bind(ds);
    let pages = 0;
    ds.query = async (sql: string, params?: unknown[]) => {
      // The export's pages only (they read output_redacted): the sealer's periodic pass reads sized pages too, and one
      // counted here made the export's first page fail (503) in a loaded CI run.
      if (sql.includes('page_rows') && sql.includes('output_redacted') && ++pages >= 2) throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
      return original(sql, params);
    };
    try {
      return await work();
    } finally {
      ds.query = original;
    }
  }

  it('HTTP/1.0, CSV: whole, the header and every row; cut short, the rows sent and then a line saying the file is incomplete', async () => {
    const whole = await exportOverHttp10(port, '/v1/tool-calls/export?format=csv', ops);
    expect(whole.head).toMatch(/^HTTP\/1\.1 200/);
    const wholeLines = whole.body.trimEnd().split('\r\n');
    expect(wholeLines).toHaveLength(ROWS + 1);
    expect(whole.body).not.toContain('#export incomplete');

    const cut = await failingAfterFirstPage(() => exportOverHttp10(port, '/v1/tool-calls/export?format=csv', ops));
    const lines = cut.body.trimEnd().split('\r\n');
    expect(lines.length).toBeLessThan(ROWS + 1);
    expect(lines.at(-1)).toBe(`#export incomplete - it stopped after ${lines.length - 2} rows when the database failed - request it again`);
    expect(lines.slice(0, -1)).toEqual(wholeLines.slice(0, lines.length - 1)); // what came before it is the export's head, unchanged
  });

  it('HTTP/1.0, NDJSON: cut short, the last line is {exportIncomplete: true, rows}, no tool call', async () => {
    const cut = await failingAfterFirstPage(() => exportOverHttp10(port, '/v1/tool-calls/export?format=ndjson', ops));
    const lines = cut.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = lines.at(-1)!;
    expect(last).toMatchObject({ exportIncomplete: true, rows: lines.length - 1 });
    expect(last.detail).toMatch(/incomplete; request it again/);
    expect(lines.slice(0, -1).every((l) => typeof l.id === 'string' && !('exportIncomplete' in l))).toBe(true);
    expect(lines.length - 1).toBeGreaterThan(0);
    const whole = await exportOverHttp10(port, '/v1/tool-calls/export?format=ndjson', ops);
    expect(whole.body.trimEnd().split('\n')).toHaveLength(ROWS); // and a whole one has no such line
    expect(whole.body).not.toContain('exportIncomplete');
  });

  it('HTTP/1.1: cut short, the response is aborted (no last chunk), with no marker line; whole, it ends', async () => {
    const cut = await failingAfterFirstPage(() => exportOverHttp11(port, '/v1/tool-calls/export?format=csv', ops));
    expect(cut.status).toBe(200);
    expect(cut.complete).toBe(false);
    expect(cut.body).not.toContain('#export incomplete');
    const whole = await exportOverHttp11(port, '/v1/tool-calls/export?format=csv', ops);
    expect(whole.complete).toBe(true);
    expect(whole.body.trimEnd().split('\r\n')).toHaveLength(ROWS + 1);
  });
});
