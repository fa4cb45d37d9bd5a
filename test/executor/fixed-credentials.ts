import type { CredentialsService } from '../../src/credentials/credentials.service.js';

/**
 * A CredentialsService stand-in for executor tests built without the app: the org stores `config`, unchanged for
 * the whole test (the executor loads it with its stamp once a call, and checks the stamp before each retry).
 * `load`: run before handing it back (a slow database, say).
 */
export function fixedCredentials(config: Record<string, unknown>, load: () => Promise<void> = async () => undefined): CredentialsService {
  const stamp = 'fixed-credentials-stamp';
  return {
    loadStamped: async () => {
      await load();
      return { config, stamp };
    },
    stampOf: async () => stamp,
  } as unknown as CredentialsService;
}
