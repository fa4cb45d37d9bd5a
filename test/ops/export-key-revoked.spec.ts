import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { exportOverHttp10, exportOverHttp11 } from './export-http.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

/**
 * An export authenticates once, then streams for as long as its ledger takes: minutes for a large org. One begun just
 * before its key's revocation went on handing out the whole ledger after the revocation's 204 (cross-replica
 * coherence review: 20,001 rows, 40 MB, read after it). It now stops at its next batch, as a failed database stops it
 * (README "Exporting"): over HTTP/1.1 without the last chunk, over HTTP/1.0 with a last line saying why.
 */
describe('an export whose API key is revoked while it streams', () => {
  let t: TestApp;
  let org: string;
  let port: number;
  const ROWS = 1200; // three batches of 500, 500 and 200
  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Export Revoked Co');
    port = (t.app.getHttpServer().address() as AddressInfo).port;
    const run = await insertRun(t.ds, org);
    await insertCalls(t.ds, Array.from({ length: ROWS }, (_, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(i) })));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  /** Runs `work` (an export with a new ops key) with that key revoked through the API as soon as the first batch is read. */
  async function revokedAfterFirstBatch<T>(work: (key: string) => Promise<T>): Promise<{ result: T; revokedStatus: number }> {
    const key = await createKey(t, org, 'ops');
    const ds = t.ds as unknown as { query: (sql: string, params?: unknown[]) => Promise<unknown> };
    const original = ds.query.bind(ds);
    let revokedStatus = 0;
    ds.query = async (sql: string, params?: unknown[]) => {
      const rows = await original(sql, params);
      if (sql.includes('page_rows') && sql.includes('output_redacted') && revokedStatus === 0) { // the export's pages, not the sealer's
        revokedStatus = -1;
        revokedStatus = (await t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth)).status;
      }
      return rows;
    };
    try {
      return { result: await work(key.key), revokedStatus };
    } finally {
      ds.query = original;
    }
  }

  it('HTTP/1.1: the body stops after the batch read before the revocation, without its last chunk', async () => {
    const { result: cut, revokedStatus } = await revokedAfterFirstBatch((key) => exportOverHttp11(port, '/v1/tool-calls/export?format=csv', key));
    expect(revokedStatus).toBe(204);
    expect(cut.status).toBe(200);
    expect(cut.complete).toBe(false);
    const rows = cut.body.trimEnd().split('\r\n').length - 1;
    expect(rows).toBeLessThanOrEqual(500);
    expect(cut.body).not.toContain('#export incomplete');
  });

  it('HTTP/1.0, NDJSON: the file ends with a line saying it is incomplete because the key was revoked', async () => {
    const { result: cut } = await revokedAfterFirstBatch((key) => exportOverHttp10(port, '/v1/tool-calls/export?format=ndjson', key));
    const lines = cut.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = lines.at(-1)!;
    expect(last).toMatchObject({ exportIncomplete: true, rows: lines.length - 1 });
    expect(last.detail).toBe(`the export stopped after ${lines.length - 1} rows (its API key was revoked): this file is incomplete; request it again`);
    expect(lines.length - 1).toBeLessThanOrEqual(500);
    expect(lines.slice(0, -1).every((l) => typeof l.id === 'string')).toBe(true);
  });

  it('HTTP/1.0, CSV: the last row is the one-cell incomplete line naming the revocation', async () => {
    const { result: cut } = await revokedAfterFirstBatch((key) => exportOverHttp10(port, '/v1/tool-calls/export?format=csv', key));
    const lines = cut.body.trimEnd().split('\r\n');
    expect(lines.at(-1)).toBe(`#export incomplete - it stopped after ${lines.length - 2} rows when its API key was revoked - request it again`);
    expect(lines.length - 2).toBeLessThanOrEqual(500);
  });

  it('a key still live exports every row, and another key revoked meanwhile does not stop it', async () => {
    const live = await createKey(t, org, 'ops');
    const { result: whole } = await revokedAfterFirstBatch(() => exportOverHttp11(port, '/v1/tool-calls/export?format=csv', live.key));
    expect(whole.complete).toBe(true);
    expect(whole.body.trimEnd().split('\r\n')).toHaveLength(ROWS + 1);
  });
});
