import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeyEntity, ROLES, type Role } from '../../src/auth/api-key.entity.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { captureLogs } from '../../src/logging/logging.js';
import { listRoutes } from '../support/routes.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

describe('API keys, roles and org scope', () => {
  let t: TestApp;
  let orgA: string;
  let orgB: string;
  const keys: Record<string, Record<Role, string>> = {};

  beforeAll(async () => {
    t = await startTestApp();
    orgA = await createOrg(t, 'A');
    orgB = await createOrg(t, 'B');
    for (const org of [orgA, orgB]) {
      keys[org] = {} as Record<Role, string>;
      for (const role of ROLES) keys[org][role] = (await createKey(t, org, role)).key;
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  it('guards every route: each has @Roles or @Public, and every /v1 route is keyed', () => {
    const routes = listRoutes(t.app);
    expect(routes.length).toBeGreaterThan(5);
    for (const r of routes) {
      expect(r.isPublic || (r.roles?.length ?? 0) > 0, `${r.method} ${r.path} has no @Roles`).toBe(true);
      if (r.path.startsWith('/v1')) expect(r.isPublic, `${r.method} ${r.path} must not be public`).toBe(false);
    }
  });

  it('answers 401 without a key and 403 for a wrong role, on every route', async () => {
    for (const r of listRoutes(t.app).filter((x) => !x.isPublic)) {
      // `\:` is a literal colon in a route (e.g. tool-calls\:batch), not a parameter.
      const path = r.path.replace(/(?<!\\):[A-Za-z]+/g, () => randomUUID()).replace(/\\:/g, ':');
      const call = () => t.http[r.method.toLowerCase() as 'get'](path);
      const none = await call();
      expect(none.status, `${r.method} ${r.path} without key`).toBe(401);
      expect(none.body.code).toBe('UNAUTHENTICATED');
      const wrong = ROLES.find((role) => !r.roles!.includes(role));
      if (wrong) {
        const res = await call().set(bearer(keys[orgA][wrong]));
        expect(res.status, `${r.method} ${r.path} as ${wrong}`).toBe(403);
        expect(res.body.code).toBe('FORBIDDEN');
        // It names the key's role and the ones the route takes: which key to use instead.
        const takes = r.roles!.length === 1 ? r.roles![0] : `${r.roles!.slice(0, -1).join(', ')} or ${r.roles!.at(-1)}`;
        expect(res.body.detail, `${r.method} ${r.path}`).toBe(`this API key (role ${wrong}) may not call this route: it takes ${takes} keys`);
      }
    }
  });

  it('reads the Bearer scheme case-insensitively (RFC 9110 §11.1), the key itself exactly', async () => {
    const { key } = await createKey(t, orgA, 'ops');
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      expect((await t.http.get(`/v1/orgs/${orgA}`).set('Authorization', `${scheme} ${key}`)).status, scheme).toBe(200);
    }
    expect((await t.http.get(`/v1/orgs/${orgA}`).set('Authorization', `Bearer ${key.toUpperCase()}`)).status).toBe(401);
    expect((await t.http.get(`/v1/orgs/${orgA}`).set('Authorization', `Bearer  ${key}`)).status).toBe(401);
  });

  it('a platform key an admin names like the bootstrap key is not revoked by the next start (only keys a start made are)', async () => {
    const created = await postApiKey(t.http, adminAuth, { orgId: null, role: 'admin', name: 'bootstrap admin (BOOTSTRAP_ADMIN_KEY)' });
    expect(created.status).toBe(201);
    await t.app.get(ApiKeysService).ensureBootstrapKey(); // what every replica's start runs
    const [row] = (await t.ds.query('SELECT revoked_at FROM api_keys WHERE id = $1', [created.body.id])) as { revoked_at: Date | null }[];
    expect(row.revoked_at).toBeNull();
    expect((await t.http.get('/v1/tools').set(bearer(created.body.key as string))).status).toBe(200);
    // The configured bootstrap key still works too.
    expect((await t.http.get('/v1/tools').set(adminAuth)).status).toBe(200);
  });

  it('gives one identical 401, with its WWW-Authenticate challenge, for unknown and revoked keys; a missing or malformed header is told its form', async () => {
    const { key, id } = await createKey(t, orgA, 'ops');
    expect((await t.http.get(`/v1/orgs/${orgA}`).set(bearer(key))).status).toBe(200);
    expect((await t.http.delete(`/v1/api-keys/${id}`).set(adminAuth)).status).toBe(204);
    const bodies = [];
    for (const headers of [{}, bearer('tgw_unknown-key-unknown-key-unknown-key'), bearer(key), { Authorization: 'Basic abc' }]) {
      const res = await t.http.get(`/v1/orgs/${orgA}`).set(headers);
      expect(res.status).toBe(401);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      // RFC 9110 §15.5.2: a 401 carries the challenge of the scheme it wants (RFC 6750 §3).
      expect(res.headers['www-authenticate']).toBe('Bearer realm="tool-gateway"');
      const { correlationId: _c, ...rest } = res.body as Record<string, unknown>;
      bodies.push(rest);
    }
    // Nothing tells a revoked key from one that never was; only the header's form is said, never its value.
    expect(bodies[2]).toEqual(bodies[1]);
    expect(bodies.map((b) => (b as { detail: string }).detail)).toEqual([
      'a valid API key is required: send it as Authorization: Bearer <key>',
      'a valid API key is required',
      'a valid API key is required',
      'a valid API key is required (the Authorization header must be "Bearer <key>")',
    ]);
    const blank = await t.http.get(`/v1/orgs/${orgA}`).set({ Authorization: 'Bearer two words' });
    expect(blank.body.detail).toBe('a valid API key is required (the key after "Bearer " must be 1-512 printable ASCII characters, no blanks)');
    expect(blank.text).not.toContain('two words');
  });

  it('hides other orgs: 404 identical to a random id', async () => {
    const other = await t.http.get(`/v1/orgs/${orgB}`).set(bearer(keys[orgA].admin));
    const random = await t.http.get(`/v1/orgs/${randomUUID()}`).set(bearer(keys[orgA].admin));
    expect(other.status).toBe(404);
    expect(random.status).toBe(404);
    const strip = (b: Record<string, unknown>) => ({ ...b, correlationId: undefined });
    expect(strip(other.body)).toEqual(strip(random.body));
    const flags = await t.http.put(`/v1/orgs/${orgB}/feature-flags/tool_calling_enabled`).set(bearer(keys[orgA].admin)).send({ enabled: true });
    expect(flags.status).toBe(404);
    const listOther = await t.http.get(`/v1/api-keys?orgId=${orgB}`).set(bearer(keys[orgA].admin));
    expect(listOther.status).toBe(404);
  });

  it('shows a key once and stores only its hash', async () => {
    const res = await postApiKey(t.http, adminAuth, { orgId: orgA, role: 'agent', name: 'shown once' });
    expect(res.status).toBe(201);
    const { key, id } = res.body as { key: string; id: string };
    expect(key).toMatch(/^tgw_[A-Za-z0-9_-]{43}$/);
    const list = await t.http.get(`/v1/api-keys?orgId=${orgA}`).set(adminAuth);
    expect(JSON.stringify(list.body)).not.toContain(key);
    expect((list.body.items as { id: string }[]).some((k) => k.id === id)).toBe(true);
    const rows = (await t.ds.query('SELECT row_to_json(k)::text AS j FROM api_keys k')) as { j: string }[];
    for (const r of rows) {
      expect(r.j).not.toContain(key);
      expect(r.j).not.toContain(TEST_ADMIN_KEY);
    }
  });

  it('a graceful stop writes the lastUsedAt it has not flushed yet, and seals with the database still open', async () => {
    const other = await startTestApp();
    const { key, id } = await createKey(other, orgA, 'ops');
    expect((await other.http.get(`/v1/orgs/${orgA}`).set(bearer(key))).status).toBe(200);
    const seal = other.app.get(LedgerSealerService).sealNow(); // a pass under way when the stop begins
    const logs = captureLogs();
    try {
      await other.close(); // the periodic flush (every 30 s) has not run: only the shutdown flush can write it
      await seal;
    } finally {
      logs.stop();
    }
    const [row] = (await t.ds.query('SELECT last_used_at FROM api_keys WHERE id = $1', [id])) as { last_used_at: Date | null }[];
    expect(row.last_used_at).not.toBeNull();
    expect(logs.lines.filter((l) => /flush at shutdown failed|sealing.*failed|pass failed/i.test(l))).toEqual([]);
  });

  it('records lastUsedAt', async () => {
    const { key, id } = await createKey(t, orgA, 'ops');
    await t.http.get(`/v1/orgs/${orgA}`).set(bearer(key));
    const list = await t.http.get(`/v1/api-keys?orgId=${orgA}`).set(adminAuth);
    const row = (list.body.items as { id: string; lastUsedAt: string | null }[]).find((k) => k.id === id);
    expect(row?.lastUsedAt).not.toBeNull();
  });

  it('only platform admins create orgs and platform keys; agent keys cannot be platform keys', async () => {
    expect((await t.http.post('/v1/orgs').set(bearer(keys[orgA].admin)).send({ name: 'x' })).status).toBe(403);
    expect((await postApiKey(t.http, bearer(keys[orgA].admin), { orgId: null, role: 'ops', name: 'x' })).status).toBe(403);
    const agentPlatform = await postApiKey(t.http, adminAuth, { orgId: null, role: 'agent', name: 'x' });
    expect(agentPlatform.status).toBe(400);
    const platformOps = await createKey(t, null, 'ops');
    expect((await t.http.get(`/v1/orgs/${orgB}`).set(bearer(platformOps.key))).status).toBe(200);
  });

  // API.md §9: 401 → 403 → the rest. A key of the wrong kind (platform vs org) is refused like a wrong role, by the
  // guard (@PlatformKeyOnly, @OrgKeyOnly, @KeyKind), before the body is read or validated: 403 whatever the body holds.
  it('refuses a key of the wrong kind with 403 before the body is validated, and still serves the right key', async () => {
    const orgAdmin = bearer(keys[orgA].admin);
    const forbidden = (res: { status: number; body: { code?: string; detail?: string } }, detail: string, what: string) =>
      expect([res.status, res.body.code, res.body.detail], what).toEqual([403, 'FORBIDDEN', detail]);

    // POST /v1/orgs: platform admin only.
    for (const body of [{}, { name: '' }, { name: 'x', id: 'not-a-uuid' }, { name: 'x', extra: 1 }]) {
      forbidden(await t.http.post('/v1/orgs').set(orgAdmin).send(body), 'only a platform admin can create orgs', `orgs ${JSON.stringify(body)}`);
    }
    forbidden(await t.http.post('/v1/orgs').set(orgAdmin).set('Content-Type', 'application/json').send('{not json'), 'only a platform admin can create orgs', 'orgs, bad JSON');
    expect((await t.http.post('/v1/orgs').set(adminAuth).send({})).status).toBe(400);
    expect((await t.http.post('/v1/orgs').set(adminAuth).send({ name: 'kind-ok' })).status).toBe(201);

    // POST /v1/runs: keys of an org only.
    const runs = 'runs are created with an agent or admin key of an org; a platform key (orgId null) belongs to no org';
    for (const body of [{}, { specialistId: '' }, { specialistId: 'support-bot', extra: 1 }]) {
      forbidden(await t.http.post('/v1/runs').set(adminAuth).send(body), runs, `runs ${JSON.stringify(body)}`);
    }
    expect((await t.http.post('/v1/runs').set(orgAdmin).send({})).status).toBe(400);
    expect((await t.http.post('/v1/runs').set(orgAdmin).send({ specialistId: 'support-bot' })).status).toBe(201);
    expect((await t.http.post('/v1/runs').set(bearer(keys[orgA].agent)).send({ specialistId: 'support-bot' })).status).toBe(201);

    // POST /v1/api-keys: an org admin asking for a platform key (orgId exactly null) is refused whatever else is wrong.
    const platformKeys = 'only a platform admin can create platform keys';
    for (const body of [{ orgId: null, role: 'admin', name: '' }, { orgId: null }, { orgId: null, role: 'agent', name: 'x' }, { orgId: null, role: 'ops', name: 'x', extra: 1 }]) {
      forbidden(await postApiKey(t.http, orgAdmin, body), platformKeys, `api-keys ${JSON.stringify(body)}`);
    }
    // Any other orgId is not a platform key: validation (400) and org scope (404) answer as before.
    expect((await postApiKey(t.http, orgAdmin, { role: 'admin', name: '' })).status).toBe(400);
    expect((await postApiKey(t.http, orgAdmin, { orgId: 42, role: 'admin', name: 'x' })).status).toBe(400);
    expect((await postApiKey(t.http, orgAdmin, { orgId: orgB, role: 'admin', name: '' })).status).toBe(400);
    expect((await postApiKey(t.http, orgAdmin, { orgId: orgB, role: 'admin', name: 'x' })).status).toBe(404);
    expect((await postApiKey(t.http, orgAdmin, { orgId: orgA, role: 'admin', name: '' })).status).toBe(400);
    expect((await postApiKey(t.http, orgAdmin, { orgId: orgA, role: 'agent', name: 'kind-ok' })).status).toBe(201);
    // A platform admin's bad body is a 400 as ever; its platform key is made.
    expect((await postApiKey(t.http, adminAuth, { orgId: null, role: 'admin', name: '' })).status).toBe(400);
    expect((await postApiKey(t.http, adminAuth, { orgId: null, role: 'ops', name: 'kind-ok' })).status).toBe(201);
  });

  it('a lookup that read the key just before its revoke committed answers its own request but does not cache it', async () => {
    const { key, id } = await createKey(t, orgA, 'ops');
    const svc = t.app.get(ApiKeysService);
    const repo = t.ds.getRepository(ApiKeyEntity);
    const realFindOne = repo.findOne.bind(repo);
    let revoked!: () => void;
    const revokeDone = new Promise<void>((resolve) => (revoked = resolve));
    let read!: () => void;
    const readDone = new Promise<void>((resolve) => (read = resolve));
    // The real database read happens first; its answer is handed back only after the revoke finished.
    repo.findOne = (async (...args: Parameters<typeof repo.findOne>) => {
      const row = await realFindOne(...args);
      read();
      await revokeDone;
      return row;
    }) as typeof repo.findOne;
    try {
      const slow = svc.authenticate(key);
      await readDone;
      repo.findOne = realFindOne;
      expect((await t.http.delete(`/v1/api-keys/${id}`).set(adminAuth)).status).toBe(204);
      revoked();
      expect(await slow).not.toBeNull(); // it read the key before the revoke: its own request may pass
    } finally {
      repo.findOne = realFindOne;
    }
    expect(await svc.authenticate(key)).toBeNull(); // but what it read was not cached
    expect((await t.http.get('/v1/tool-calls').set(bearer(key))).status).toBe(401);
  });

  it('records api_key events with the actor', async () => {
    const { id } = await createKey(t, orgA, 'expert');
    await t.http.delete(`/v1/api-keys/${id}`).set(adminAuth);
    const events = (await t.ds.query(
      `SELECT type, actor, metadata FROM runtime_ledger_events WHERE metadata->>'apiKeyId' = $1 ORDER BY seq`,
      [id],
    )) as { type: string; actor: { role: string }; metadata: Record<string, unknown> }[];
    expect(events.map((e) => e.type)).toEqual(['api_key.created', 'api_key.revoked']);
    expect(events[0].actor.role).toBe('admin');
  });
});
