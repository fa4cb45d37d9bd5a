/**
 * Every operation of the served OpenAPI document says which API-key roles may call it, exactly as its route's
 * @Roles does (the guard answers 403 FORBIDDEN to any other), and documents one 403 that names those roles: a
 * generic "wrong role" would not tell an integrator that, say, an ops key may list approvals but not decide them.
 * Swagger merges a second @ApiResponse(403) into the first (descriptions joined by a blank line) and a second
 * @ApiOperation over the first (its summary reset), so "one" is checked on the text as well as on the key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listRoutes, type RouteInfo } from '../support/routes.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

interface Operation {
  summary?: string;
  description?: string;
  responses: Record<string, { description: string }>;
}
type Doc = { paths: Record<string, Record<string, Operation>> };

/** "admin", "admin or ops", "expert, admin, ops or agent" → the roles, in order. */
const ROLE_LIST = '[a-z]+(?:, [a-z]+)*(?: or [a-z]+)?';
const parseList = (list: string): string[] => list.split(/, | or /);
const listOf = (roles: readonly string[]): string => (roles.length === 1 ? roles[0] : `${roles.slice(0, -1).join(', ')} or ${roles[roles.length - 1]}`);
/** A route's path as the document writes it: `/:runId` → `/{runId}`, the escaped colon of `tool-calls\:batch` plain. */
const docPath = (path: string): string => path.replace(/\\:/g, ':').replace(/\/:(\w+)/g, '/{$1}');
const count = (text: string, word: string): number => text.split(word).length - 1;

describe('OpenAPI: the roles that may call each operation', () => {
  let t: TestApp;
  let doc: Doc;
  let routes: (RouteInfo & { operation: Operation | undefined; what: string })[];
  beforeAll(async () => {
    t = await startTestApp();
    doc = (await t.http.get('/openapi.json')).body as Doc;
    routes = listRoutes(t.app)
      .filter((r) => r.roles !== undefined)
      .map((r) => ({ ...r, what: `${r.method} ${docPath(r.path)}`, operation: doc.paths[docPath(r.path)]?.[r.method.toLowerCase()] }));
  });
  afterAll(async () => {
    await t?.close();
  });

  it('covers every operation of the document: each is a route with @Roles, and each such route is documented', () => {
    expect(routes.length).toBeGreaterThanOrEqual(33); // 33 @Roles across the controllers today: a walk that found none would prove nothing
    expect(routes.filter((r) => !r.operation).map((r) => r.what)).toEqual([]);
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.filter((d) => !routes.some((r) => r.what === d))).toEqual([]);
  });

  it('each operation’s description begins "Roles: …", listing the route’s @Roles in order, once', () => {
    const wrong = routes.flatMap((r) => {
      const description = r.operation?.description ?? '';
      const documented = new RegExp(`^Roles: (${ROLE_LIST})\\.(?: |\\n|$)`).exec(description)?.[1];
      const ok = documented !== undefined && JSON.stringify(parseList(documented)) === JSON.stringify(r.roles) && count(description, 'Roles:') === 1;
      return ok ? [] : [`${r.what}: @Roles ${listOf(r.roles!)}, documented ${JSON.stringify(description.slice(0, 80))}`];
    });
    expect(wrong).toEqual([]);
  });

  it('each operation documents one 403, naming the same roles, in place of the generic one', () => {
    const wrong = routes.flatMap((r) => {
      const forbidden = r.operation?.responses['403']?.description ?? '';
      const list = listOf(r.roles!);
      const named = `FORBIDDEN: not ${/^[aeiou]/.test(list) ? 'an' : 'a'} ${list} key`;
      const ok = count(forbidden, named) === 1 && count(forbidden, 'FORBIDDEN') === 1 && !forbidden.includes('\n\n');
      return ok ? [] : [`${r.what}: expected one "${named}", documented ${JSON.stringify(forbidden)}`];
    });
    expect(wrong).toEqual([]);
  });

  it('keeps what the operations said of themselves besides the roles (one ApiOperation: a second resets the summary)', () => {
    const op = (method: string, path: string) => doc.paths[path][method];
    expect(op('delete', '/v1/api-keys/{id}')).toMatchObject({ summary: 'Revoke an API key', description: expect.stringMatching(/^Roles: admin\..*\n\nRevoking a revoked key answers 204 again/s) });
    expect(op('get', '/v1/ledger/verify').description).toMatch(/^Roles: ops or admin\..*A platform key verifies the platform chain/s);
    expect(op('post', '/v1/runs/{runId}/tool-calls').responses['403'].description).toMatch(/^blocked .*tool-call body.*FORBIDDEN: not an agent or admin key/);
  });

  it('says what the roles of the approval routes may each see and decide', () => {
    expect(doc.paths['/v1/approvals'].get.description).toMatch(/^Roles: expert, admin, ops or agent\. An agent key sees client approvals only/);
    const decision = doc.paths['/v1/approvals/{id}/decision'].post;
    expect(decision.description).toMatch(/^Roles: expert, admin or agent\. Expert approvals: expert or admin keys decide them; client approvals: any agent key of the run’s org \(not only the one that started the run\) or admin keys/);
    expect(decision.responses['403'].description).toMatch(/^FORBIDDEN: not an expert, admin or agent key, or a key that may see the approval but not decide its kind/);
  });
});
