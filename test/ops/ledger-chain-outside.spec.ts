import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * An auditor's own implementation of README "Recomputing the chain outside the gateway", written from that text
 * alone (nothing of the gateway's hashing is imported): canonical JSON with keys sorted by UTF-16 code units, no
 * whitespace, strings and numbers as JSON.stringify writes them.
 */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

interface ListedEvent {
  id: string;
  orgId: string;
  type: string;
  runId: string | null;
  toolCallId: string | null;
  actor: unknown;
  metadata: unknown;
  createdAt: string;
  createdAtExact: string;
  chainSeq: number;
  prevHash: string;
  hash: string;
}

const hashOf = (e: ListedEvent, prevHash: string): string =>
  createHash('sha256')
    .update(
      canonical({
        prevHash,
        chainSeq: e.chainSeq,
        id: e.id,
        orgId: e.orgId,
        type: e.type,
        runId: e.runId,
        toolCallId: e.toolCallId,
        actor: e.actor,
        metadata: e.metadata,
        createdAt: e.createdAtExact,
      }),
      'utf8',
    )
    .digest('hex');

describe('the hash chain recomputed outside the gateway from GET /v1/ledger/events alone', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('every event hashes to its hash from the listed fields, the last one to verify’s headHash; a changed field does not', async () => {
    const org = await createOrg(t, 'Outside auditor');
    const ops = (await createKey(t, org, 'ops')).key;
    const events = t.app.get(LedgerEventsService);
    // Keys out of order, nested, non-ASCII text and fractions: what canonical JSON has to agree on.
    await events.append([{ orgId: org, type: 'test.audit', metadata: { zeta: 1, alpha: { b: [2, 1.5, 'é'], a: null }, Émile: 'ü\u2028' } }]);
    for (let i = 0; i < 3; i++) await events.append([{ orgId: org, type: 'test.audit', metadata: { i, note: `step ${i}` } }]);
    await t.app.get(LedgerSealerService).sealNow();

    const res = await t.http.get('/v1/ledger/events').query({ orgId: org, limit: '200' }).set(bearer(ops));
    expect(res.status).toBe(200);
    const items = (res.body.items as ListedEvent[]).sort((a, b) => a.chainSeq - b.chainSeq);
    expect(items.length).toBeGreaterThanOrEqual(5); // the org's creation and the ops key's, then the four above
    expect(items.map((e) => e.chainSeq)).toEqual(items.map((_, i) => i + 1));
    for (const e of items) {
      expect(e.createdAtExact).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      expect(e.createdAtExact.slice(0, 23)).toBe(e.createdAt.slice(0, 23)); // the same instant, to the microsecond
    }

    let prev = '0'.repeat(64);
    for (const e of items) {
      expect(e.prevHash, `prevHash of chainSeq ${e.chainSeq}`).toBe(prev);
      expect(hashOf(e, prev), `hash of chainSeq ${e.chainSeq}`).toBe(e.hash);
      prev = e.hash;
    }
    const verify = await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(bearer(ops));
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({ ok: true, headHash: prev });

    // The recomputation checks content, not only links: any field changed gives another hash.
    const first = items.find((e) => e.type === 'test.audit')!;
    const firstPrev = items[items.indexOf(first) - 1].hash;
    expect(hashOf({ ...first, metadata: { ...(first.metadata as object), zeta: 2 } }, firstPrev)).not.toBe(first.hash);
    expect(hashOf({ ...first, type: 'test.audit2' }, firstPrev)).not.toBe(first.hash);
  });
});
