import { afterEach, describe, expect, it } from 'vitest';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { loggedPath } from '../logging/logging.js';
import { holdsCredentialShape } from './credential-shape.js';
import { forgetConfiguredSecrets, registerConfiguredSecret } from './configured-secrets.js';
import { redactInput, redactOutput } from './redaction.service.js';

/** BOOTSTRAP_ADMIN_KEY may be any 32-512 printable characters: an operator's `openssl rand -hex 32` has no tgw_ shape. */
const ADMIN_KEY = 'a3f9c2e17b4d8f60e5a1c9b27d3e4f8a6b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e';
const SYMBOLS_KEY = 'Zx!9$q+R/7&k=Lm#2?pT@w%4Vb^8Nc*1Hs~6Dz';

describe('redaction: a configured secret (BOOTSTRAP_ADMIN_KEY) is redacted by value', () => {
  afterEach(() => forgetConfiguredSecrets());

  it('unregistered, a hex key is no known shape (control)', () => {
    expect(holdsCredentialShape(ADMIN_KEY)).toBe(false);
  });

  it('in the request log path, input, output and log text; as an identifier it is refused', () => {
    registerConfiguredSecret(ADMIN_KEY);
    expect(loggedPath(`/v1/api-keys/${ADMIN_KEY}/revoke`).includes(ADMIN_KEY)).toBe(false);
    expect(JSON.stringify(redactInput({ note: `admin key ${ADMIN_KEY}` })).includes(ADMIN_KEY)).toBe(false);
    expect(JSON.stringify(redactOutput({ note: `key=${ADMIN_KEY}x` })).includes(ADMIN_KEY)).toBe(false);
    expect(loggableErrorText(new Error(`bad key ${ADMIN_KEY}`)).includes(ADMIN_KEY)).toBe(false);
    expect(holdsCredentialShape(ADMIN_KEY)).toBe(true);
    expect(holdsCredentialShape(`run-${ADMIN_KEY}`)).toBe(true);
    expect(holdsCredentialShape('run-2024-01-01')).toBe(false);
  });

  it('percent-encoded too', () => {
    registerConfiguredSecret(SYMBOLS_KEY);
    const encoded = encodeURIComponent(SYMBOLS_KEY);
    expect(encoded).not.toBe(SYMBOLS_KEY);
    for (const t of [`https://x.example/cb?k=${encoded}`, `k=${SYMBOLS_KEY}`, `/v1/x/${encoded}`]) {
      const out = JSON.stringify(redactInput({ t }));
      expect(out.includes(SYMBOLS_KEY) || out.includes(encoded)).toBe(false);
    }
    expect(holdsCredentialShape(encoded)).toBe(true);
  });

  it('a value too short to be a key is not registered (it would hide ordinary words)', () => {
    registerConfiguredSecret('admin');
    registerConfiguredSecret(undefined);
    expect(redactInput({ note: 'admin panel' })).toEqual({ note: 'admin panel' });
  });
});
