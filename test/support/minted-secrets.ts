/**
 * The secrets minted during the run: API keys the test helpers create and the
 * tokens the vendor emulator hands out. Each is appended, as it is minted, to
 * the file TEST_MINTED_SECRETS names (src/emulator/minted-secrets.ts; the
 * global setup sets it), and the run-wide scan searches for them as for the
 * fixed test secrets.
 */
import { existsSync, readFileSync } from 'node:fs';
import { MINTED_SECRETS_ENV } from '../../src/emulator/minted-secrets.js';
import { secretForms, type Needle } from './run-leak-scan.js';

export { MINTED_SECRETS_ENV };

/**
 * The format every value of a kind starts with, before its random part: an API key's tgw_, Shopify's shpat_ and
 * shprt_, the emulator's Atza|emu-, a JWT's header. A window of the first 24 characters would hold only 3 random
 * characters of a Jumio token; counted after this, it holds 24.
 */
const FORMAT_PREFIX = /^(?:tgw_|shpat_|shprt_|Atza\|emu-|eyJ[\w-]*\.)/;
export const formatPrefixLength = (value: string): number => FORMAT_PREFIX.exec(value)?.[0].length ?? 0;

/**
 * The minted secrets by name: "<label> #<n>", n counting lines of the file (the run log's directory keeps it
 * when the scan finds something, so #n says which value). Each value once; a line without a label is its value.
 */
export function readMintedSecrets(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(path)) return out;
  const seen = new Set<string>();
  readFileSync(path, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const tab = line.indexOf('\t');
      const value = line.slice(tab + 1);
      if (value === '' || seen.has(value)) return;
      seen.add(value);
      out[`${tab > 0 ? line.slice(0, tab) : 'minted secret'} #${i + 1}`] = value;
    });
  return out;
}

/** The needles of the minted secrets in the file (secretForms, windows counted past the format prefix). */
export function mintedSecretForms(path: string): { secrets: number; needles: Needle[] } {
  const minted = readMintedSecrets(path);
  return { secrets: Object.keys(minted).length, needles: secretForms(minted, formatPrefixLength) };
}
