import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.js';
import { capped, logResponse, MAX_LOGGED_BODY, MINTED_KEY_PLACEHOLDER, overflowFindings, withoutNewKey } from './response-log.js';
import { scanRunLog, secretForms } from './run-leak-scan.js';
import { lineCollector, MAX_PARTIAL, RUN_LOG_ENV } from './run-log.js';
import { NANGO_SECRET_KEY, TEST_ADMIN_KEY } from './secrets.js';
import { adminAuth, createKey, createOrg, startTestApp, type TestApp } from './test-app.js';

/**
 * A made-up secret, no test secret (nothing registers it): the run-wide scan does not look for it, so planting it in an
 * org's name fails nothing; this file searches for it itself. Of no shape redaction knows (a `shpat_…` token would be
 * kept `[REDACTED]` in the name), so the answer carries it as sent.
 */
const PLANTED = 'planted0f1a2b3c4d5e6f708192a3b4c5d6e7f8';
const THIS_FILE = relative(process.cwd(), fileURLToPath(import.meta.url));

/** The run log lines this file wrote, each as [source, text]. */
function myRunLogLines(): [string, string][] {
  const path = process.env[RUN_LOG_ENV];
  expect(path, 'the global setup sets TEST_RUN_LOG').toBeTruthy();
  return readFileSync(path!, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith(`${THIS_FILE} | `))
    .map((l) => {
      const tab = l.indexOf('\t');
      return [l.slice(THIS_FILE.length + 3, tab), l.slice(tab + 1)];
    });
}
const linesOf = (source: string): string[] => myRunLogLines().filter(([s]) => s === source).map(([, text]) => text);

describe('every response a test gets, and each gateway\'s /metrics, go to the run log (issue 7)', () => {
  describe('the in-process gateway (startTestApp)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp();
    });
    afterAll(async () => {
      await t?.close();
    });

    it('logs the status line, headers and body, so the scan finds a secret-shaped value in a body', async () => {
      const res = await t.http.post('/v1/orgs').set(adminAuth).send({ name: `org ${PLANTED}` });
      expect(res.status).toBe(201);
      const logged = linesOf('response POST /v1/orgs');
      expect(logged).toContain('HTTP 201');
      expect(logged.some((l) => /^content-type: application\/json/i.test(l))).toBe(true);
      expect(logged.some((l) => l.includes(PLANTED))).toBe(true);

      const scan = await scanRunLog(process.env[RUN_LOG_ENV]!, secretForms({ PLANTED }));
      expect(scan.findings.map((f) => f.where).join('\n')).toContain(`${THIS_FILE} | response POST /v1/orgs`);
    });

    it('never logs the request: neither the key a test sends nor the query string', async () => {
      const res = await t.http.get('/v1/api-keys').query({ orgId: PLANTED }).set(adminAuth);
      expect(linesOf('response GET /v1/api-keys')).toContain(`HTTP ${res.status}`);
      expect(myRunLogLines().some(([source, text]) => `${source} ${text}`.includes(TEST_ADMIN_KEY))).toBe(false);
      expect(myRunLogLines().some(([source]) => source.includes(PLANTED))).toBe(false);
    });

    it('logs the answer to POST /v1/api-keys without the key it hands out (by design, once)', async () => {
      const orgId = await createOrg(t);
      const { key, id } = await createKey(t, orgId, 'agent');
      const logged = linesOf('response POST /v1/api-keys');
      const body = logged.find((l) => l.includes(id));
      expect(body, logged.join('\n')).toBeDefined();
      expect(JSON.parse(body!)).toMatchObject({ id, key: MINTED_KEY_PLACEHOLDER, role: 'agent' });
      expect(myRunLogLines().some(([, text]) => text.includes(key))).toBe(false);
    });

    it('keeps the first 64 KiB of a large body, and says how much it left out', () => {
      const body = `${'x'.repeat(MAX_LOGGED_BODY - 3)}${PLANTED}`;
      logResponse('GET', 'http://127.0.0.1:1/big?k=v', { status: 200, headers: { 'content-type': 'text/plain' }, text: body } as unknown as Response);
      const logged = linesOf('response GET /big');
      expect(logged.slice(0, 3)).toEqual(['HTTP 200', 'content-type: text/plain', '']);
      expect(logged[3]).toBe(body.slice(0, MAX_LOGGED_BODY));
      expect(logged[4]).toBe(`[… ${body.length - MAX_LOGGED_BODY} more characters searched, not logged; 0 secret(s) found in them, with their surroundings:]`);
    });

    it('searches what is past the cap: a secret there is logged with its surroundings, for the run-wide scan to find', () => {
      const needles = secretForms({ PLANTED });
      const rest = `${'row\n'.repeat(50_000)}{"leaked":"${PLANTED}"}\n${'row\n'.repeat(10)}`;
      const found = overflowFindings(rest, { needles });
      expect(found).toHaveLength(1);
      expect(found[0]).toContain(PLANTED);
      expect(found[0]!.length).toBeLessThan(PLANTED.length + 2 * 100 + 1);
      expect(overflowFindings('row\n'.repeat(50_000), { needles })).toEqual([]);
      // Fails closed: minted secrets that cannot be read leave the whole rest in the log.
      expect(overflowFindings(rest, { needles, unreadable: new Error('gone') })).toEqual([rest]);
    });

    it('finds a secret across the cap: its start a few characters before the cut, the rest after it', () => {
      const needles = secretForms({ PLANTED });
      for (const before of [1, 10, PLANTED.length - 1]) {
        const body = `${'x'.repeat(MAX_LOGGED_BODY - before)}${PLANTED}${'y'.repeat(100)}`;
        const logged = capped(body, { needles });
        // The logged part holds fewer characters of it than its needle: the search past the cap starts before the cut.
        expect(logged.slice(0, MAX_LOGGED_BODY)).not.toContain(PLANTED);
        expect(logged.slice(MAX_LOGGED_BODY)).toContain(PLANTED);
        expect(logged).toMatch(/; 1 secret\(s\) found in them/);
      }
    });

    it('a runaway line cut at MAX_PARTIAL: a secret across the cut is whole on one of the two lines', () => {
      const collector = lineCollector('runaway probe');
      // Written in two pieces, the first past MAX_PARTIAL ending with the secret's first 10 characters: it is cut there.
      collector.push(`${'z'.repeat(MAX_PARTIAL)}${PLANTED.slice(0, 10)}`);
      collector.push(`${PLANTED.slice(10)}${'z'.repeat(100)}\n`);
      collector.flush();
      const lines = linesOf('runaway probe');
      expect(lines.length).toBeGreaterThanOrEqual(2);
      expect(lines.some((l) => l.includes(PLANTED))).toBe(true);
    });

    it("leaves out only the agent's own add_note text handed back as it wrote it", () => {
      const url = 'http://127.0.0.1:1/v1/runs/r1/tool-calls';
      const note = `call back later ${PLANTED}`;
      const answer = (echoed: string): Response => {
        const result = { orderId: '1001', note: echoed };
        const text = JSON.stringify({ status: 'succeeded', result, toolResult: { content: JSON.stringify(result) } });
        return { status: 200, headers: {}, text } as unknown as Response;
      };
      const call = (name: string, input: object): object => ({ type: 'tool_use', id: 'toolu_1', name, input });
      logResponse('POST', url, answer(note), call('shopify_order', { action: 'add_note', orderId: '1001', note }));
      expect(linesOf('response POST /v1/runs/r1/tool-calls').some((l) => l.includes(PLANTED))).toBe(false);
      // Anything else carrying it is logged as it came: another tool, or a note the agent did not write.
      logResponse('POST', url, answer(note), call('shopify_query', { action: 'add_note', note }));
      logResponse('POST', url, answer(`${note}!`), call('shopify_order', { action: 'add_note', orderId: '1001', note }));
      expect(linesOf('response POST /v1/runs/r1/tool-calls').filter((l) => l.includes(PLANTED))).toHaveLength(2);
      // The same text in another field of that very answer is logged too; a short note cuts nothing else out.
      const withCopy = (): Response => {
        const result = { orderId: '1001', note };
        const text = JSON.stringify({ status: 'succeeded', result, toolResult: { content: JSON.stringify(result) }, debug: { echoed: note } });
        return { status: 200, headers: {}, text } as unknown as Response;
      };
      logResponse('POST', 'http://127.0.0.1:1/v1/runs/r2/tool-calls', withCopy(), call('shopify_order', { action: 'add_note', orderId: '1001', note }));
      const logged = linesOf('response POST /v1/runs/r2/tool-calls').join('\n');
      expect(logged.split(PLANTED)).toHaveLength(2); // once: the debug copy
      expect(logged).toContain("[the agent's own note]");
      // Handed back with the org's own credential redacted by the gateway, the rest as written: still the agent's own.
      const withOrgKey = `${note} and ${NANGO_SECRET_KEY}`;
      const redacted = withOrgKey.replace(NANGO_SECRET_KEY, '[REDACTED]');
      logResponse('POST', 'http://127.0.0.1:1/v1/runs/r3/tool-calls', answer(redacted), call('shopify_order', { action: 'add_note', orderId: '1001', note: withOrgKey }));
      expect(linesOf('response POST /v1/runs/r3/tool-calls').some((l) => l.includes(PLANTED))).toBe(false);
      // Not a note the agent did not write, redacted or not.
      logResponse('POST', 'http://127.0.0.1:1/v1/runs/r4/tool-calls', answer(`${redacted}!`), call('shopify_order', { action: 'add_note', orderId: '1001', note: withOrgKey }));
      expect(linesOf('response POST /v1/runs/r4/tool-calls').some((l) => l.includes(PLANTED))).toBe(true);
    });

    it('leaves a 201 POST /v1/api-keys key out only when it is new: a fixed test secret handed out is kept (for the scan)', () => {
      const url = 'http://127.0.0.1:1/v1/api-keys';
      // Not logged here: a fixed secret in the run log is a run-wide finding. withoutNewKey says what would be.
      expect(withoutNewKey('POST', url, 201, JSON.stringify({ id: 'k', role: 'admin', key: TEST_ADMIN_KEY }))).toBeUndefined();
      expect(withoutNewKey('POST', url, 201, JSON.stringify({ id: 'k', role: 'admin', key: 'not-a-minted-key' }))).toBeUndefined();
      expect(withoutNewKey('POST', url, 200, JSON.stringify({ id: 'k', role: 'admin', key: `tgw_${'a'.repeat(43)}` }))).toBeUndefined();
      expect(withoutNewKey('POST', url, 201, JSON.stringify({ id: 'k', role: 'admin', key: `tgw_${'b'.repeat(43)}` }))).toContain(MINTED_KEY_PLACEHOLDER);
    });

    it('appends /metrics to the run log when the app is closed', async () => {
      const other = await startTestApp();
      await other.http.get('/healthz');
      const before = linesOf('metrics').length;
      await other.close();
      const metrics = linesOf('metrics');
      expect(metrics.length).toBeGreaterThan(before);
      expect(metrics.some((l) => l.startsWith('# HELP '))).toBe(true);
    });
  });

  describe('a gateway child process (startGatewayProcess)', () => {
    let gw: GatewayProcess;
    beforeAll(async () => {
      gw = await startGatewayProcess();
    }, 60_000);
    afterAll(async () => {
      await gw?.stop();
    });

    it('logs its responses, and its /metrics when stopped', async () => {
      const res = await gw.http.post('/v1/orgs').set(adminAuth).send({ name: `child ${PLANTED}` });
      expect(res.status).toBe(201);
      expect(linesOf('response POST /v1/orgs').some((l) => l.includes(`child ${PLANTED}`))).toBe(true);

      const before = linesOf('metrics').length;
      await gw.stop();
      expect(linesOf('metrics').length).toBeGreaterThan(before);
    }, 60_000);

    it('logs its /metrics when asked, so that one a test ends with a signal (stop() finds it dead) is scanned too', async () => {
      const killed = await startGatewayProcess();
      try {
        const before = linesOf('metrics').length;
        await killed.logMetrics();
        killed.kill('SIGTERM');
        await killed.waitExit();
        await killed.stop(); // a no-op now: the gateway is gone
        const metrics = linesOf('metrics');
        expect(metrics.length).toBeGreaterThan(before);
        expect(metrics.slice(before).some((l) => l.startsWith('# HELP '))).toBe(true);
      } finally {
        await killed.stop();
      }
    }, 60_000);
  });
});
