import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logSocketAnswer } from '../support/response-log.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/** Writes raw bytes (header fields Node's clients cannot repeat, bodies that are not UTF-8) and reads the answer until the server closes. */
function raw(port: number, bytes: string | Buffer): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`not closed by the server: ${Buffer.concat(chunks).toString('latin1').slice(0, 300)}`));
    }, 5_000);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      logSocketAnswer(typeof bytes === 'string' ? bytes : bytes.toString('latin1'), Buffer.concat(chunks)); // the run-wide leak scan reads it
      const [headers, ...rest] = Buffer.concat(chunks).toString('utf8').split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body: rest.join('\r\n\r\n') });
    });
    s.write(bytes);
  });
}

describe('what the client wrote is what the gateway acts on: exact numbers, one Idempotency-Key, UTF-8 bodies', () => {
  let h: Harness;
  let org: OrgSetup;
  let port: number;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, {
      tools: ['nango_proxy.post', 'order_lookup.lookup'], vendors: ['nango', 'shopify'],
      rules: [{ id: 'posts-ok', match: { toolName: 'nango_proxy.post' }, decision: 'allow' }],
    });
    port = (h.t.app.getHttpServer().address() as AddressInfo).port;
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  const ledgerRows = async () => ((await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as { n: number }[])[0].n;
  const post = (text: string) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ ...bearer(org.agentKey), 'Content-Type': 'application/json' }).send(text);
  const nangoPost = (id: string, replyTo: string) =>
    `{"type":"tool_use","id":"${id}","name":"nango_proxy","input":{"action":"post","path":"v1/messages","body":{"reply_to":${replyTo}}}}`;

  it('a number a double would change (an integer beyond 2^53, a long decimal, a non-zero one below its range) → 400 saying to send it as a string; nothing recorded or sent', async () => {
    const rows = await ledgerRows();
    const sent = h.emu.requests.length;
    for (const n of ['1234567890123456789', '-9223372036854775807', '12345678901234567890.0', '1.000000000000000001', '99999999999999.99', '1e-400']) {
      const res = await post(nangoPost(`toolu_big_${rows}_${n.length}`, n));
      expect(res.status, n).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
      expect(res.body.detail).toMatch(/send it as a string/);
    }
    expect(await ledgerRows()).toBe(rows);
    expect(h.emu.requests.length).toBe(sent);
    // admin routes read bodies the same way
    const admin = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set({ ...adminAuth, 'Content-Type': 'application/json' })
      .send('{"rules":[{"id":"r","match":{"toolName":"order_lookup.lookup","where":[{"path":"orderId","op":"gt","value":12345678901234567890}]},"decision":"allow","reason":"x"}]}');
    expect(admin.status).toBe(400);
    expect(admin.body.detail).toMatch(/send it as a string/);
  });

  it('the same id as a string, decimals and large numbers a double holds exactly reach the vendor unchanged', async () => {
    for (const [replyTo, expected] of [
      ['"1234567890123456789"', '"reply_to":"1234567890123456789"'],
      ['9007199254740992', '"reply_to":9007199254740992'],
      ['1e20', '"reply_to":100000000000000000000'],
      ['0.1', '"reply_to":0.1'],
      ['1e3', '"reply_to":1000'],
    ]) {
      const before = h.emu.requests.length;
      const res = await post(nangoPost(`toolu_exact_${Date.now()}_${replyTo.length}`, replyTo));
      expect(res.status, `${replyTo}: ${res.text.slice(0, 300)}`).toBe(200);
      const sent = h.emu.requests.slice(before).find((r) => r.vendor === 'nango');
      expect(sent?.body, replyTo).toContain(expected);
    }
  });

  const toolCall = (idempotencyFields: string[], auth = `Authorization: Bearer ${org.agentKey}\r\n`) => {
    const body = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    return (
      `POST /v1/runs/${org.runId}/tool-calls HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
      idempotencyFields.map((k) => `Idempotency-Key: ${k}\r\n`).join('') +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
    );
  };

  it('Idempotency-Key sent in two header fields → 400 problem+json; nothing recorded or sent (Node would join them into "k1, k2")', async () => {
    const rows = await ledgerRows();
    const sent = h.emu.requests.length;
    for (const keys of [['k1', 'k2'], ['k1', 'k1']]) {
      const res = await raw(port, toolCall(keys));
      expect(res.status, res.headers).toBe(400);
      expect(res.headers).toMatch(/content-type: application\/problem\+json/i);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'BAD_REQUEST', detail: expect.stringMatching(/Idempotency-Key must be sent once/) });
    }
    expect(await ledgerRows()).toBe(rows);
    expect(h.emu.requests.length).toBe(sent);
    // authentication first (API.md §9): an anonymous caller gets 401, not the header check
    expect((await raw(port, toolCall(['k1', 'k2'], ''))).status).toBe(401);
  });

  it('one field is one key, commas included: "k1, k2" in a single field is accepted', async () => {
    const res = await raw(port, toolCall([`a, b ${Date.now()}`]));
    expect(res.status, res.body.slice(0, 300)).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ status: 'succeeded' });
  });

  /** A raw POST of `body` (bytes), closing after the answer. */
  const rawPost = (path: string, headers: string, body: Buffer) =>
    Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]);
  /** `before` + the byte 0xE9 (é in Latin-1, never valid alone in UTF-8) + `after`. */
  const latin1E = (before: string, after: string) => Buffer.concat([Buffer.from(before), Buffer.from([0xe9]), Buffer.from(after)]);
  const json = 'Content-Type: application/json\r\n';

  it('a body that is not valid UTF-8 → 400 problem+json, not read with U+FFFD in its place and acted on; nothing stored or sent', async () => {
    const rows = await ledgerRows();
    const sent = h.emu.requests.length;
    const agent = `Authorization: Bearer ${org.agentKey}\r\n`;
    const call = (id: string) => latin1E(`{"type":"tool_use","id":"${id}","name":"nango_proxy","input":{"action":"post","path":"v1/messages","body":{"text":"caf`, '"}}}');
    const res = await raw(port, rawPost(`/v1/runs/${org.runId}/tool-calls`, agent + json, call(`toolu_latin1_${Date.now()}`)));
    expect(res.status, res.body.slice(0, 300)).toBe(400);
    expect(res.headers).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'BAD_REQUEST', detail: 'body is not valid UTF-8' });
    expect(await ledgerRows()).toBe(rows);
    expect(h.emu.requests.length).toBe(sent);
    // admin routes read bodies the same way: the org is not created under another name
    const name = `latin1 ${crypto.randomUUID()} caf`;
    const orgRes = await raw(port, rawPost('/v1/orgs', `Authorization: ${adminAuth.Authorization}\r\n` + json, latin1E(`{"name":"${name}`, '"}')));
    expect(orgRes.status).toBe(400);
    expect(JSON.parse(orgRes.body)).toMatchObject({ code: 'BAD_REQUEST', detail: 'body is not valid UTF-8' });
    expect(((await h.t.ds.query('SELECT count(*)::int AS n FROM orgs WHERE name LIKE $1', [`${name}%`])) as { n: number }[])[0].n).toBe(0);
    // the order of checks holds: authentication first (API.md §9), and a body that is not JSON at all is 415
    expect((await raw(port, rawPost(`/v1/runs/${org.runId}/tool-calls`, json, call('toolu_latin1_anon')))).status).toBe(401);
    expect((await raw(port, rawPost(`/v1/runs/${org.runId}/tool-calls`, `${agent}Content-Type: text/plain\r\n`, call('toolu_latin1_text')))).status).toBe(415);
  });

  it('valid UTF-8 beyond ASCII reaches the vendor as written', async () => {
    const before = h.emu.requests.length;
    const body = Buffer.from(`{"type":"tool_use","id":"toolu_utf8_${Date.now()}","name":"nango_proxy","input":{"action":"post","path":"v1/messages","body":{"text":"café ✓ 𝄞"}}}`);
    const res = await raw(port, rawPost(`/v1/runs/${org.runId}/tool-calls`, `Authorization: Bearer ${org.agentKey}\r\n` + json, body));
    expect(res.status, res.body.slice(0, 300)).toBe(200);
    expect(h.emu.requests.slice(before).find((r) => r.vendor === 'nango')?.body).toContain('"text":"café ✓ 𝄞"');
  });
});
