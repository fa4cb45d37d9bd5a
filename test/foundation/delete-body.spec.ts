/**
 * A DELETE takes no body, and its body was never read (the body reader skipped DELETE): a docs reviewer found that
 * - DELETE /v1/api-keys/:id with a 70 KiB body revoked the key (204), where README "Limits" says 413, the rest unread
 *   (the same request sent with Expect: 100-continue was refused 413);
 * - {"dryRun": true} in its body revoked it too, where unknown fields are refused (400 naming them);
 * - it ran while its body was still arriving, where README "Stopping" says a request starts only once its body is read.
 * Its body is now read as a POST's is, and refused unless empty.
 */
import { connect } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

describe('a DELETE with a body', () => {
  let t: TestApp;
  let orgId: string;
  beforeAll(async () => {
    t = await startTestApp();
    orgId = await createOrg(t, 'Delete bodies');
  });
  afterAll(async () => t?.close());

  const revokedAt = async (id: string): Promise<string | null> =>
    ((await t.http.get(`/v1/api-keys?orgId=${orgId}`).set(adminAuth)).body.items as { id: string; revokedAt: string | null }[]).find((k) => k.id === id)!.revokedAt;

  it('over 64 KiB: 413 PAYLOAD_TOO_LARGE, nothing revoked', async () => {
    const key = await createKey(t, orgId, 'ops');
    const res = await t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth).set('Content-Type', 'application/json').send(JSON.stringify({ pad: 'x'.repeat(70 * 1024) }));
    expect([res.status, res.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    expect(await revokedAt(key.id)).toBeNull();
  });

  it('a field it does not take ({"dryRun": true}): 400 VALIDATION_FAILED naming it, nothing revoked', async () => {
    const key = await createKey(t, orgId, 'ops');
    const res = await t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth).send({ dryRun: true });
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.body.errors).toEqual(['dryRun: property dryRun should not exist (a DELETE takes no body)']);
    expect(await revokedAt(key.id)).toBeNull();
    // A body that is no object, and one that is no JSON, are refused too.
    expect((await t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth).set('Content-Type', 'application/json').send('[1]')).body.errors).toEqual(['body: a DELETE takes no body']);
    expect((await t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth).set('Content-Type', 'application/json').send('{nope')).status).toBe(400);
    expect(await revokedAt(key.id)).toBeNull();
  });

  it('none, or an empty one ({} or null, as some clients always send): deleted, 204', async () => {
    for (const body of [undefined, '{}', 'null', '  ']) {
      const key = await createKey(t, orgId, 'ops');
      const req = t.http.delete(`/v1/api-keys/${key.id}`).set(adminAuth);
      const res = body === undefined ? await req : await req.set('Content-Type', 'application/json').send(body);
      expect(res.status, `body ${body}`).toBe(204);
      expect(await revokedAt(key.id)).not.toBeNull();
    }
  });

  it('still uploading: not started until its body is in', async () => {
    const key = await createKey(t, orgId, 'ops');
    const port = ((t.app.getHttpServer() as Server).address() as { port: number }).port;
    const sock = connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.write(`DELETE /v1/api-keys/${key.id} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pad":"`);
    await new Promise((r) => setTimeout(r, 500));
    try {
      expect(await revokedAt(key.id)).toBeNull(); // before: revoked while the body was arriving
    } finally {
      sock.destroy();
    }
  });
});
