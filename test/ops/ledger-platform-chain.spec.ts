import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NIL_UUID } from '../../src/common/ids.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Platform-level events (platform keys created and revoked, bootstrap admin
 * keys retired) are chained under the nil UUID, which no org can take. Platform
 * keys read and verify that chain like an org's; org keys never reach it.
 */
describe('the platform (nil UUID) chain', () => {
  let t: TestApp;
  let platformOps: string;

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    platformOps = (await createKey(t, null, 'ops')).key;
    const { id } = await createKey(t, null, 'admin');
    expect((await t.http.delete(`/v1/api-keys/${id}`).set(adminAuth)).status).toBe(204);
    await t.app.get(LedgerSealerService).sealNow();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('platform keys verify it over the API, and the CLI does with --org <nil>', async () => {
    for (const auth of [adminAuth, bearer(platformOps)]) {
      const res = await t.http.get('/v1/ledger/verify').query({ orgId: NIL_UUID }).set(auth);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ ok: true, headHash: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect(res.body.checked).toBeGreaterThanOrEqual(3);
    }
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(['--org', NIL_UUID], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code, err.join('\n')).toBe(0);
    expect(JSON.parse(out[0])).toMatchObject({ ok: true });
  });

  it('platform keys list its events', async () => {
    for (const auth of [adminAuth, bearer(platformOps)]) {
      const res = await t.http.get('/v1/ledger/events').query({ orgId: NIL_UUID, limit: '200' }).set(auth);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const items = res.body.items as { orgId: string; type: string }[];
      expect(items.every((e) => e.orgId === NIL_UUID)).toBe(true);
      expect(items.map((e) => e.type)).toEqual(expect.arrayContaining(['api_key.created', 'api_key.revoked']));
    }
  });

  it('org keys, admin or ops, never reach it (404, as for another org), nor another org', async () => {
    const org = await createOrg(t, 'Tenant');
    const other = await createOrg(t, 'Neighbour');
    for (const role of ['admin', 'ops']) {
      const key = bearer((await createKey(t, org, role)).key);
      for (const orgId of [NIL_UUID, other]) {
        const verify = await t.http.get('/v1/ledger/verify').query({ orgId }).set(key);
        expect(verify.status, `${role} verify ${orgId}`).toBe(404);
        expect(verify.body.code).toBe('NOT_FOUND');
        expect((await t.http.get('/v1/ledger/events').query({ orgId }).set(key)).status, `${role} events ${orgId}`).toBe(404);
      }
      // Their own listing holds none of the platform's events.
      const own = await t.http.get('/v1/ledger/events').query({ limit: '200' }).set(key);
      expect((own.body.items as { orgId: string }[]).every((e) => e.orgId === org)).toBe(true);
    }
    const agent = bearer((await createKey(t, org, 'agent')).key);
    expect((await t.http.get('/v1/ledger/verify').query({ orgId: NIL_UUID }).set(agent)).status).toBe(403);
  });

  it('the nil UUID names the platform chain on the ledger routes only: it is still no org elsewhere', async () => {
    expect((await t.http.get('/v1/tool-calls').query({ orgId: NIL_UUID }).set(adminAuth)).status).toBe(404);
    expect((await t.http.get(`/v1/orgs/${NIL_UUID}`).set(adminAuth)).status).toBe(404);
  });

  it('documents it in the OpenAPI description of both routes', async () => {
    const doc = (await t.http.get('/openapi.json')).body as { paths: Record<string, { get: { description?: string; parameters: { name: string; description?: string }[] } }> };
    for (const path of ['/v1/ledger/verify', '/v1/ledger/events']) {
      const op = doc.paths[path].get;
      expect(op.description, path).toContain(NIL_UUID);
      expect(op.parameters.find((p) => p.name === 'orgId')?.description, path).toContain(NIL_UUID);
    }
  });
});
