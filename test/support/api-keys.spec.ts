import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, keyPrefix } from '../../src/auth/api-key-hash.js';
import { postApiKey, recordReturnedApiKey } from './api-keys.js';
import { MINTED_SECRETS_ENV, readMintedSecrets } from './minted-secrets.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from './test-app.js';

/**
 * The API keys a spec mints land in the run's minted-secrets file (the global setup names it), so the
 * run-wide leak scan searches for them: through postApiKey, createKey, and keys read out of an answer.
 */
describe('API keys minted by the specs are recorded for the run-wide leak scan', () => {
  let t: TestApp;
  let org: string;
  const mintedFile = (): string => {
    const path = process.env[MINTED_SECRETS_ENV];
    expect(path, `${MINTED_SECRETS_ENV} (set by the global setup)`).toBeTruthy();
    return path!;
  };
  /** label (without its line number) → value, for the values in `keys` */
  const recorded = (keys: string[]): Record<string, string> =>
    Object.fromEntries(Object.entries(readMintedSecrets(mintedFile())).filter(([, v]) => keys.includes(v)).map(([label, v]) => [label.replace(/ #\d+$/, ''), v]));

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Recorded keys');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('postApiKey records the key a 201 returns, by role and caller; createKey by role too', async () => {
    const res = await postApiKey(t.http, adminAuth, { orgId: org, role: 'agent', name: 'recorded' });
    expect(res.status).toBe(201);
    const platform = await postApiKey(t.http, adminAuth, { orgId: null, role: 'ops', name: 'recorded platform' }, 'a spec of its own');
    expect(platform.status).toBe(201);
    const { key } = await createKey(t, org, 'expert');
    expect(recorded([res.body.key as string, platform.body.key as string, key])).toEqual({
      'API key (agent, postApiKey)': res.body.key,
      'API key (ops, a spec of its own)': platform.body.key,
      'API key (expert, createKey)': key,
    });
  });

  it('a refused POST (no key in its answer) records nothing', async () => {
    // The file is the run's: another worker's files record their keys in it meanwhile. These POSTs record under a
    // caller name of their own, which must not appear.
    const caller = `refused-${randomUUID()}`;
    const admin = (await createKey(t, org, 'admin')).key;
    const refused = [
      await postApiKey(t.http, bearer(admin), { orgId: null, role: 'ops', name: 'x' }, caller), // an org admin asking for a platform key
      await postApiKey(t.http, adminAuth, { orgId: null, role: 'agent', name: 'x' }, caller), // agent keys are never platform keys
      await postApiKey(t.http, adminAuth, { orgId: org, role: 'agent', name: 'n', constructor: 'x' }, caller),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 400, 400]);
    const minted = readMintedSecrets(mintedFile());
    expect(Object.keys(minted).filter((label) => label.includes(caller))).toEqual([]);
    expect(Object.values(minted)).toContain(admin); // while a key a 201 returned is
  });

  it('every key the org has was recorded: the listing shows no key prefix without its recorded key', async () => {
    await postApiKey(t.http, adminAuth, { orgId: org, role: 'ops', name: 'listed' });
    const listed = await t.http.get('/v1/api-keys').query({ orgId: org, limit: 200 }).set(adminAuth);
    expect(listed.status).toBe(200);
    const prefixes = (listed.body.items as { keyPrefix: string }[]).map((k) => k.keyPrefix);
    expect(prefixes.length).toBe(4) // agent, expert, admin, ops;
    const recordedPrefixes = new Set(Object.values(readMintedSecrets(mintedFile())).map(keyPrefix));
    expect(prefixes.filter((p) => !recordedPrefixes.has(p))).toEqual([]);
  });

  it('recordReturnedApiKey reads a key out of any answer, keeps tabs and line breaks out of its label, and ignores a `key` that is no API key', () => {
    const key = generateApiKey();
    const answer = (body: unknown) => ({ body }) as Response;
    expect(recordReturnedApiKey(answer({ key, role: 'ad\tmin\n' }), 'a\r\nfuzzer')).toBe(key);
    expect(recorded([key])).toEqual({ 'API key (ad min , a  fuzzer)': key });
    const caller = `not-a-key-${randomUUID()}`; // the file is the run's: another worker records in it meanwhile
    for (const body of [{ key: 'tool_calling_enabled' }, { key: 'tgw_short' }, { key: 42 }, null, 'tgw_not_a_body_0123456789abcdefghij'])
      expect(recordReturnedApiKey(answer(body), caller)).toBeUndefined();
    expect(Object.keys(readMintedSecrets(mintedFile())).filter((label) => label.includes(caller))).toEqual([]);
  });
});
