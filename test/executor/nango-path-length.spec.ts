import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NANGO_PATH_MAX } from '../../src/vendors/nango/nango-path.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, setupNangoOrg } from './support.js';

/**
 * The path limit through the whole pipeline: the gateway adds the leading "/" before the tool's JSON Schema
 * runs (one spelling for the policy), so a limit counted on that form refused a relative path of exactly
 * NANGO_PATH_MAX characters that the definition allows. The limit counts the path after its optional "/".
 */
describe('nango_proxy path length through the pipeline', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A valid path of `length` characters, with or without its leading "/". */
  const pathOf = (length: number, slash: boolean): string => (slash ? `/v1/${'a'.repeat(length - 4)}` : `v1/${'a'.repeat(length - 3)}`);

  it.each([false, true])('a path of exactly NANGO_PATH_MAX characters (leading "/": %s) reaches the provider', async (slash) => {
    const path = pathOf(NANGO_PATH_MAX, slash);
    expect(path).toHaveLength(NANGO_PATH_MAX);
    for (const input of [{ action: 'get', path }, { action: 'post', path, body: { a: 1 } }]) {
      const before = h.emu.requests.length;
      const res = await call(h, org, 'nango_proxy', input);
      expect(res.body, input.action).toMatchObject({ status: 'succeeded' });
      const sent = h.emu.requests.slice(before);
      expect(sent, input.action).toHaveLength(1);
      expect(sent[0].path, input.action).toBe(`/proxy/${path.replace(/^\//, '')}`);
    }
  });

  // Past the definition's maxLength (the limit with the "/") ajv answers; one character past the limit without
  // a "/" only the Nango checks see, and they say which characters count.
  const tooLongForTheChecks = "(path: longer than 2048 characters (not counting a leading '/'))";
  const tooLongForTheDefinition = '(path: must NOT have more than 2049 characters)';
  it.each([
    ['one character more, no leading "/"', pathOf(NANGO_PATH_MAX + 1, false), tooLongForTheChecks],
    ['one character more after the leading "/"', pathOf(NANGO_PATH_MAX + 2, true), tooLongForTheDefinition],
    ['far longer', pathOf(NANGO_PATH_MAX * 2, false), tooLongForTheDefinition],
  ])('%s → 422 INVALID_INPUT naming `path`, nothing sent', async (_label, path, reason) => {
    for (const input of [{ action: 'get', path }, { action: 'post', path, body: { a: 1 } }]) {
      const before = h.emu.requests.length;
      const res = await call(h, org, 'nango_proxy', input);
      expect(res.status, input.action).toBe(422);
      expect(res.body, input.action).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
      expect(res.body.toolResult.content, input.action).toContain(reason);
      expect(h.emu.requests.length, input.action).toBe(before);
    }
  });
});
