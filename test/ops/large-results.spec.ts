import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ExportFormat } from '../../src/ops/tool-calls-export.format.js';
import { ToolCallsQueryService } from '../../src/ops/tool-calls-query.service.js';
import { redactOutput } from '../../src/redaction/redaction.service.js';
import { LEDGER_OUTPUT_MAX_BYTES, LEDGER_OUTPUT_PREVIEW_BYTES } from '../../src/tool-calls/ledger-output-cap.js';
import { call, rowOf, setupNangoOrg } from '../executor/support.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey, createOrg } from '../support/test-app.js';
import { insertCalls, insertRun, ledgerOrder, microsAfterEpoch2026, type SeededCall } from './ledger-seed.js';

const MB = 1024 * 1024;

/**
 * Large vendor results and the ops read side. The ledger's copy of a result (output_redacted) is capped when
 * written, the agent's is whole; and pages and export batches are bounded by size as well as by rows, for rows
 * written before the cap (and large inputs): 40 rows of ~1 MB here.
 */
describe('large results in the ledger', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a large Nango answer: the agent gets all of it, the ledger row a truncated stub of its redacted JSON', async () => {
    const customers = Array.from({ length: 3000 }, (_, i) => ({ id: i, email: `jenny.rosen${i}@example.com`, name: `Customer ${i}`, note: 'n'.repeat(60) }));
    const body = { customers, next: null };
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, body });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: true });
    const id = res.body.toolCallId as string;

    const full = await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey));
    expect(full.status).toBe(200);
    expect(full.body.result).toEqual(body);

    const redactedText = JSON.stringify(redactOutput(body));
    expect(Buffer.byteLength(redactedText)).toBeGreaterThan(LEDGER_OUTPUT_MAX_BYTES);
    const row = await rowOf(h, id);
    const stub = row.output_redacted as { truncated: boolean; bytes: number; preview: string };
    expect(Object.keys(stub).sort()).toEqual(['bytes', 'preview', 'truncated']);
    expect(stub.truncated).toBe(true);
    expect(stub.bytes).toBe(Buffer.byteLength(redactedText));
    expect(Buffer.byteLength(stub.preview)).toBeLessThanOrEqual(LEDGER_OUTPUT_PREVIEW_BYTES);
    expect(stub.preview.length).toBeGreaterThan(1000);
    expect(redactedText.startsWith(stub.preview)).toBe(true);
    expect(stub.preview).not.toMatch(/jenny\.rosen\d+@example\.com/);
    expect(stub.preview).toContain('[REDACTED]');

    const detail = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(org.adminKey));
    expect(detail.status).toBe(200);
    expect(detail.body.outputRedacted).toEqual(stub);
    const listed = await h.t.http.get('/v1/tool-calls').query({ runId: org.runId, limit: '200' }).set(bearer(org.adminKey));
    expect(listed.status).toBe(200);
    expect(listed.body.items.find((c: { id: string }) => c.id === id)?.outputRedacted).toEqual(stub);
  });

  it('a small answer is still kept whole', async () => {
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body.status).toBe('succeeded');
    expect((await rowOf(h, res.body.toolCallId as string)).output_redacted).toEqual(redactOutput(res.body.result));
  });

  describe('rows of ~1 MB written before the cap', () => {
    const ROWS = 40;
    let ops: string;
    let opsId: string;
    let orgId: string;
    let seeded: SeededCall[];
    let service: ToolCallsQueryService;
    beforeAll(async () => {
      orgId = await createOrg(h.t, 'Large rows');
      ({ key: ops, id: opsId } = await createKey(h.t, orgId, 'ops'));
      const runId = await insertRun(h.t.ds, orgId);
      const blob = 'x'.repeat(MB);
      const rows = Array.from({ length: ROWS }, (_, i) => ({ orgId, runId, createdAt: microsAfterEpoch2026(i * 1000), outputRedacted: { i, blob } }));
      seeded = ledgerOrder(await insertCalls(h.t.ds, rows));
      service = h.t.app.get(ToolCallsQueryService);
    });

    it('a list page ends early with a cursor, ~16 MiB at most; following it reads every row once, in order', async () => {
      const ids: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await h.t.http.get('/v1/tool-calls').query({ limit: '200', ...(cursor ? { cursor } : {}) }).set(bearer(ops));
        expect(res.status).toBe(200);
        expect(res.text.length).toBeLessThan(16 * MB + 1.1 * MB);
        ids.push(...(res.body.items as { id: string }[]).map((c) => c.id));
        cursor = res.body.nextCursor as string | null;
        pages++;
      } while (cursor);
      expect(pages).toBeGreaterThan(2);
      expect(ids).toEqual(seeded.map((s) => s.id));
    });

    it('the export streams in small chunks from batches bounded by size, and completes over HTTP', async () => {
      const principal = { keyId: opsId, orgId, role: 'ops' as const }; // a live key: the export checks it before each batch
      const batchBytes: number[] = [];
      const query = h.t.ds.query.bind(h.t.ds);
      // A pass-through that records what each page read from the real database returned.
      const spy = vi.spyOn(h.t.ds, 'query').mockImplementation(async (...args: Parameters<typeof query>) => {
        const rows: unknown = await query(...args);
        if (/FROM tool_calls/.test(args[0]) && Array.isArray(rows)) batchBytes.push(JSON.stringify(rows).length);
        return rows;
      });
      let chunks: number[];
      try {
        const file = await service.export(principal, { format: 'ndjson' as ExportFormat });
        chunks = [];
        for await (const chunk of file.getStream() as Readable) chunks.push((chunk as string).length);
      } finally {
        spy.mockRestore();
      }
      expect(chunks.reduce((a, b) => a + b, 0)).toBeGreaterThan(ROWS * MB);
      expect(Math.max(...chunks)).toBeLessThan(1.1 * MB);
      expect(batchBytes.length).toBeGreaterThan(2);
      expect(Math.max(...batchBytes)).toBeLessThan(8 * MB + 1.1 * MB);

      const res = await h.t.http.get('/v1/tool-calls/export').query({ format: 'ndjson' }).set(bearer(ops)).buffer(true).parse((r, cb) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (c: string) => (text += c));
        r.on('end', () => cb(null, text));
      });
      expect(res.status).toBe(200);
      const lines = (res.body as string).trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; outputRedacted: { i: number } });
      expect(lines.map((l) => l.id)).toEqual(seeded.map((s) => s.id));
      expect(lines.map((l) => l.outputRedacted.i)).toEqual(seeded.map((s) => (s.outputRedacted as { i: number }).i));
    });
  });
});
