import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { exportOverHttp10, exportOverHttp11 } from './export-http.js';
import { insertCalls, insertRun, microsAfterEpoch2026 } from './ledger-seed.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * An export streams a batch at a time so that a large ledger is never held in memory (EXPORT_BATCH_BYTES). Over
 * HTTP/1.0 each batch is awaited against the drain's stop signal: raced against one promise kept pending for the whole
 * export, each race left a reaction on it holding that batch, and every batch sent stayed reachable until the end. A
 * batch sent must be garbage, over HTTP/1.1 and HTTP/1.0 alike.
 */
describe('an HTTP/1.0 export does not keep the batches it has sent', () => {
  let t: TestApp;
  let port: number;
  const orgs = { h10: '', h11: '' };
  const keys = { h10: '', h11: '' };

  beforeAll(async () => {
    t = await startTestApp();
    port = ((t.app.getHttpServer() as http.Server).address() as AddressInfo).port;
    for (const name of ['h10', 'h11'] as const) {
      const org = await createOrg(t, `Race export ${name}`);
      orgs[name] = org;
      keys[name] = (await createKey(t, org, 'ops')).key;
      const run = await insertRun(t.ds, org);
      await insertCalls(t.ds, Array.from({ length: 2000 }, (_, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(i) })));
    }
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  }, 60_000);

  async function secondBatchAlive(name: keyof typeof orgs): Promise<boolean> {
    const ds = t.ds as unknown as { query: (sql: string, params?: unknown[]) => Promise<unknown> };
    const original = ds.query.bind(ds);
    const refs: WeakRef<object>[] = [];
    let release!: () => void;
    let fourthAsked!: () => void;
    const asked = new Promise<void>((r) => (fourthAsked = r));
    ds.query = async (sql: string, params?: unknown[]) => {
      if (!(sql.includes('page_rows') && sql.includes('output_redacted') && params?.includes(orgs[name]))) return original(sql, params);
      if (refs.length === 3) {
        fourthAsked();
        await new Promise<void>((r) => (release = r)); // a long export: its next batch still to come
      }
      const rows = (await original(sql, params)) as object;
      refs.push(new WeakRef(rows));
      return rows;
    };
    const done = name === 'h10'
      ? exportOverHttp10(port, '/v1/tool-calls/export?format=ndjson', keys[name])
      : exportOverHttp11(port, '/v1/tool-calls/export?format=ndjson', keys[name]);
    try {
      await asked;
      await new Promise((r) => setTimeout(r, 300)); // batches 1-3 sent
      for (let i = 0; i < 3; i++) {
        gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      return refs[1].deref() !== undefined; // batch 2: sent, nothing needs it
    } finally {
      ds.query = original;
      release();
      await done;
    }
  }

  it('HTTP/1.1 (control): batch 2 is collected while batch 4 is read', async () => {
    expect(await secondBatchAlive('h11')).toBe(false);
  }, 30_000);

  it('HTTP/1.0: batch 2 is collected while batch 4 is read', async () => {
    expect(await secondBatchAlive('h10'), 'the rows of a batch already sent are still reachable (held by a Promise.race reaction on the pending wind-up promise)').toBe(false);
  }, 30_000);
});
