import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JUMIO_EMULATOR_CREDENTIALS, JUMIO_EXECUTION_IDS, JumioEmulator } from './jumio.emulator.js';
import { VendorEmulator } from './vendor-emulator.js';

const emu = new VendorEmulator([new JumioEmulator()]);

async function token(): Promise<string> {
  const c = JUMIO_EMULATOR_CREDENTIALS;
  const res = await fetch(`${emu.url}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: 'grant_type=client_credentials',
  });
  return ((await res.json()) as { access_token: string }).access_token;
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
