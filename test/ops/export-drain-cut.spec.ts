import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beginHttpDrain } from '../../src/app.setup.js';
import { DRAIN_BACKSTOP_MARGIN_MS, DRAIN_WIND_UP_MS } from '../../src/common/http/http-drain.js';
import { createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { exportOverHttp10, exportOverHttp11 } from './export-http.js';
import { insertCalls, insertRun, ledgerOrder, microsAfterEpoch2026 } from './ledger-seed.js';

const VENDOR_TIMEOUT_MS = 50; // the least allowed: the backstop comes ~5 s after the drain begins
const BACKSTOP_MS = VENDOR_TIMEOUT_MS + DRAIN_BACKSTOP_MARGIN_MS;
const WIND_UP_MS = BACKSTOP_MS - DRAIN_WIND_UP_MS;
/** Timers may fire a millisecond before their time as performance.now() sees it. */
const SLACK_MS = 20;

/**
 * A long export still streaming when the gateway stops (README "Exporting", "Stopping"). VENDOR_TIMEOUT_MS + 5 s after
 * the drain begins its backstop destroys every connection left. Over HTTP/1.0 (nginx's default proxy_http_version) the
 * connection's close is the body's end, so a file cut there at a chunk boundary read as a complete export of whole rows
 * (siem review). The export now ends itself a second before the backstop, between two chunks, with a last line saying
 * the gateway is stopping; over HTTP/1.1 the backstop's abort (no last chunk) still tells the client, and an export
 * that ends in time is a whole file.
 *
 * "Still streaming" is made deterministic by holding each export's second batch query (a long export's later batches
 * are simply still to come). Three exports run during one drain, each from its own org (told apart by the query's
 * org id): HTTP/1.0 NDJSON held until the end (cut by the stop), HTTP/1.1 CSV held until the end (cut by the
 * backstop), HTTP/1.0 CSV let go once the drain has begun (ends before the stop).
 */
describe('an export still streaming when the gateway stops', () => {
  let t: TestApp;
  let port: number;
  const orgs = { cut10: '', cut11: '', done10: '' };
  const keys = { cut10: '', cut11: '', done10: '' };
  let cut10Ids: string[] = [];
  const CUT10_ROWS = 1200;
  const SMALL_ROWS = 600; // two batches: 500, then 100

  beforeAll(async () => {
    t = await startTestApp({ VENDOR_TIMEOUT_MS: String(VENDOR_TIMEOUT_MS) });
    port = ((t.app.getHttpServer() as http.Server).address() as AddressInfo).port;
    for (const [name, rows] of [['cut10', CUT10_ROWS], ['cut11', SMALL_ROWS], ['done10', SMALL_ROWS]] as const) {
      const org = await createOrg(t, `Drain export ${name}`);
      orgs[name] = org;
      keys[name] = (await createKey(t, org, 'ops')).key;
      const run = await insertRun(t.ds, org);
      const seeded = await insertCalls(t.ds, Array.from({ length: rows }, (_, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(i) })));
      if (name === 'cut10') cut10Ids = ledgerOrder(seeded).map((c) => c.id);
    }
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  }, 60_000);

  it('HTTP/1.0 ends before the backstop with whole rows and a line saying the gateway is stopping; HTTP/1.1 is aborted; one done in time is whole', async () => {
    const ds = t.ds as unknown as { query: (sql: string, params?: unknown[]) => Promise<unknown> };
    const original = ds.query.bind(ds);
    const pages = new Map<string, number>();
    const asked = new Map<string, () => void>();
    const releases = new Map<string, () => void>();
    const secondBatchAsked = (name: keyof typeof orgs): Promise<void> => new Promise((r) => asked.set(orgs[name], r));
    const waiting = [secondBatchAsked('cut10'), secondBatchAsked('cut11'), secondBatchAsked('done10')];
    ds.query = async (sql: string, params?: unknown[]) => {
      const org = sql.includes('page_rows') && sql.includes('output_redacted') ? Object.values(orgs).find((o) => params?.includes(o)) : undefined;
      if (org !== undefined) {
        pages.set(org, (pages.get(org) ?? 0) + 1);
        if (pages.get(org) === 2) {
          asked.get(org)!();
          // Held: a long export's later batches, still to come. `done10`'s runs once the drain has begun; the others
          // fail as a statement timeout once the test has its answers (nobody waits for them any more).
          const go = await new Promise<boolean>((r) => releases.set(org, () => r(org === orgs.done10)));
          if (!go) throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
        }
      }
      return original(sql, params);
    };
    try {
      const cut10 = exportOverHttp10(port, '/v1/tool-calls/export?format=ndjson', keys.cut10);
      const cut11 = exportOverHttp11(port, '/v1/tool-calls/export?format=csv', keys.cut11);
      const done10 = exportOverHttp10(port, '/v1/tool-calls/export?format=csv', keys.done10);
      await Promise.all(waiting); // each has sent its first 500 rows and waits for its next batch
      const begun = performance.now();
      beginHttpDrain(t.app);
      releases.get(orgs.done10)!();
      const [a, b, c] = await Promise.all([cut10, cut11, done10]);

      // HTTP/1.0 NDJSON: the 500 rows sent, each whole and in ledger order, then the stop's line; ended by the
      // export itself, a second before the backstop, not at once when the drain began.
      expect(a.head).toMatch(/^HTTP\/1\.1 200/);
      const lines = a.body.split('\n');
      expect(lines.pop()).toBe(''); // the last line ends with its newline: nothing was cut
      expect(lines.at(-1), `an HTTP/1.0 export of ${CUT10_ROWS} rows stopped by the drain must end with a line saying so`).toBe(
        JSON.stringify({
          exportIncomplete: true,
          rows: 500,
          detail: 'the export stopped after 500 rows (the gateway is stopping): this file is incomplete; request it again',
        }),
      );
      expect(lines.length).toBe(501);
      const rows = lines.slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.every((r) => typeof r.id === 'string' && !('exportIncomplete' in r))).toBe(true);
      expect(rows.map((r) => r.id)).toEqual(cut10Ids.slice(0, 500));
      expect(a.closedAt - begun).toBeGreaterThanOrEqual(WIND_UP_MS - SLACK_MS);
      expect(a.closedAt - begun).toBeLessThan(BACKSTOP_MS);
      expect(t.logs.some((l) => l.includes('tool-call export stopped after 500 rows: the gateway is stopping'))).toBe(true);

      // HTTP/1.1 CSV: as before, the backstop aborts it without its last chunk, and no line is added.
      expect(b.status).toBe(200);
      expect(b.complete).toBe(false);
      expect(b.body.trimEnd().split('\r\n')).toHaveLength(501); // the header and the first batch
      expect(b.body).not.toContain('#export incomplete');
      expect(b.closedAt - begun).toBeGreaterThanOrEqual(BACKSTOP_MS - SLACK_MS);

      // HTTP/1.0 CSV that finished during the drain, before the stop: the whole file, no such line.
      expect(c.head).toMatch(/^HTTP\/1\.1 200/);
      expect(c.body.endsWith('\r\n')).toBe(true);
      expect(c.body.trimEnd().split('\r\n')).toHaveLength(SMALL_ROWS + 1);
      expect(c.body).not.toContain('#export incomplete');
      expect(c.closedAt - begun).toBeLessThan(WIND_UP_MS);
    } finally {
      ds.query = original;
      for (const release of releases.values()) release();
    }
    // The batch queries the stop overtook fail now, with no one waiting: no unhandled rejection may follow.
    await new Promise((r) => setTimeout(r, 100));
  }, 30_000);
});
