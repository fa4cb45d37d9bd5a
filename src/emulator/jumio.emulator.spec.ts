import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JUMIO_ACCOUNT_IDS, JUMIO_EMULATOR_CREDENTIALS, JUMIO_EXECUTION_IDS, JumioEmulator } from './jumio.emulator.js';
import { VendorEmulator } from './vendor-emulator.js';

const emu = new VendorEmulator([new JumioEmulator()]);

function tokenRequest(accept?: string): Promise<Response> {
  const c = JUMIO_EMULATOR_CREDENTIALS;
  const headers: Record<string, string> = { authorization: `Basic ${Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' };
  if (accept !== undefined) headers.accept = accept;
  return fetch(`${emu.url}/oauth2/token`, { method: 'POST', headers, body: 'grant_type=client_credentials' });
}

async function token(): Promise<string> {
  return ((await (await tokenRequest('application/json')).json()) as { access_token: string }).access_token;
}

const statusPath = `/api/v1/accounts/${JUMIO_EMULATOR_CREDENTIALS.accountId}/workflow-executions/${JUMIO_EXECUTION_IDS.processed}/status`;

beforeAll(async () => {
  await emu.start();
});
afterAll(() => emu.stop());

describe('emulated Jumio retrieval headers (VENDORS.md §3.1: missing headers → 403)', () => {
  it('needs Authorization, User-Agent and Accept: application/json', async () => {
    const bearer = `Bearer ${await token()}`;
    const status = async (headers: Record<string, string>) => (await fetch(`${emu.url}${statusPath}`, { headers })).status;
    expect(await status({ authorization: bearer, 'user-agent': 'Acme/1', accept: 'application/json' })).toBe(200);
    expect(await status({ authorization: bearer, 'user-agent': 'Acme/1', accept: '*/*' })).toBe(403);
    expect(await status({ authorization: bearer, 'user-agent': 'Acme/1' })).toBe(403); // fetch's own Accept is */*
    expect(await status({ authorization: bearer, 'user-agent': '', accept: 'application/json' })).toBe(403); // fetch would send its own
  });
});

describe('emulated Jumio token endpoint headers (VENDORS.md §3.1: Accept: application/json, missing headers → 403)', () => {
  it('refuses a token request whose Accept does not name application/json with 403', async () => {
    for (const accept of ['text/html', '*/*', undefined]) {
      const res = await tokenRequest(accept); // without one, fetch sends its own */*
      expect(res.status, String(accept)).toBe(403);
      expect(await res.json()).toMatchObject({ status: 403, title: 'Forbidden' });
    }
    const ok = await tokenRequest('application/json, text/plain;q=0.5');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
  });
});

describe('emulated Jumio accounts (VENDORS.md §3.2: one account per end user, an execution only under its own)', () => {
  it('answers an execution under its own account and 404 under any other, in Jumio\'s shapes', async () => {
    const headers = { authorization: `Bearer ${await token()}`, 'user-agent': 'Acme/1', accept: 'application/json' };
    const get = async (account: string, id: string, suffix = '') => {
      const res = await fetch(`${emu.url}/api/v1/accounts/${account}/workflow-executions/${id}${suffix}`, { headers });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const { primary, second } = JUMIO_ACCOUNT_IDS;
    const { processed, secondProcessed } = JUMIO_EXECUTION_IDS;
    expect(await get(second, secondProcessed, '/status')).toMatchObject({ status: 200, body: { account: { id: second }, workflowExecution: { id: secondProcessed, status: 'PROCESSED' } } });
    expect(await get(second, secondProcessed)).toMatchObject({ status: 200, body: { account: { id: second }, workflow: { id: secondProcessed, status: 'PROCESSED' } } });
    expect(await get(primary, processed)).toMatchObject({ status: 200, body: { account: { id: primary } } });
    const notFound = { status: 404, body: { title: 'Not Found', status: 404, detail: 'Resource not found' } };
    for (const [account, id] of [[primary, secondProcessed], [second, processed]] as const) {
      expect(await get(account, id, '/status'), `${account}/${id}`).toEqual(notFound);
      expect(await get(account, id), `${account}/${id}`).toEqual(notFound);
    }
  });
});
