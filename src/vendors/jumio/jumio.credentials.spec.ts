import { describe, expect, it } from 'vitest';
import { parseJumioCredentials } from './jumio.credentials.js';

const CREDS = { clientId: 'jumio-client', clientSecret: 'jumio-secret', region: 'amer-1', accountId: '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f' };

describe('parseJumioCredentials', () => {
  it('reads a valid config as it is', () => {
    expect(parseJumioCredentials(CREDS)).toEqual(CREDS);
  });

  it('reads an accountId stored in upper case (before the PUT lower-cased it) in lower case, as a call\'s own accountId is', () => {
    expect(parseJumioCredentials({ ...CREDS, accountId: CREDS.accountId.toUpperCase() })).toEqual(CREDS);
  });

  it.each([
    ['36 dashes', '-'.repeat(36)],
    ['36 hex digits', '0123456789abcdef0123456789abcdef0123'],
    ['dashes misplaced', '0123-4567-89ab-cdef-0123-4567-89abcd'],
    ['no UUID at all', 'acc-1'],
    ['a UUID with a trailing newline', `${CREDS.accountId}\n`],
    ['a path', '../../accounts'],
  ])('refuses an accountId that is no UUID (%s)', (_what, accountId) => {
    expect(parseJumioCredentials({ ...CREDS, accountId })).toEqual({ invalidField: 'accountId' });
  });

  it.each(['acme:client', ':', 'client:', ' : '])('refuses a clientId with a colon (%j): no HTTP Basic user-id', (clientId) => {
    expect(parseJumioCredentials({ ...CREDS, clientId })).toEqual({ invalidField: 'clientId' });
  });

  it('takes a clientSecret with a colon (the Basic password may hold one)', () => {
    expect(parseJumioCredentials({ ...CREDS, clientSecret: 'sec:ret' })).toEqual({ ...CREDS, clientSecret: 'sec:ret' });
  });
});
