import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { inspect } from 'node:util';
import type { LoggerService } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config.js';
import { CONFIG_SCHEMA, databaseEnvProblem, parseRawConfigCollecting } from '../config/config.schema.js';
import { resolveKeyring } from '../config/app-config.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { credentialOpener, type CredentialOpener } from '../ledger/credential-check.js';
import { isUuid, NIL_UUID } from '../common/ids.js';
import { dbOptions } from '../db/db-options.js';
import { runningEmbeddedDatabaseUrl } from '../db/running-embedded-url.js';
import { LedgerSealerService } from '../ledger/ledger-sealer.service.js';
import { checkAnchor, parseAnchor, verifyOrgChain, type VerifyResult } from '../ledger/ledger-verifier.service.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { poolerHint } from '../db/database-probe.js';

export const USAGE = `usage: ledger-verify --org <org uuid | ${NIL_UUID} for the platform chain> [--anchor <chainSeq>:<hash>] [--no-seal]   (needs DATABASE_URL)`;

export interface CommandOutput {
  out(line: string): void;
  err(line: string): void;
}

/**
 * Where the services the command runs log (the sealer warns of a chain it cannot
 * seal, of any org): every level to `err`, plain text. Nest's default logger
 * writes warnings to stdout, where they would precede the JSON result and break
 * `| jq`. The CLI installs it process-wide (Logger.overrideLogger), as the
 * services log through Nest's static Logger.
 */
export function commandLogger(io: Pick<CommandOutput, 'err'>): LoggerService {
  // Nest's Logger passes its context ("LedgerSealer") as the last argument.
  const line = (level: string) => (message: unknown, ...params: unknown[]) => {
    const context = typeof params.at(-1) === 'string' ? ` [${String(params.at(-1))}]` : '';
    io.err(`ledger-verify: ${level}${context} ${typeof message === 'string' ? message : inspect(message)}`);
  };
  return { log: line('log'), error: line('error'), warn: line('warn'), debug: line('debug'), verbose: line('verbose'), fatal: line('fatal') };
}

/**
 * `npm run ledger:verify -- --org <id>`: recomputes one org's hash chain with
 * the same code as GET /v1/ledger/verify and prints the JSON result.
 * Exit codes: 0 chain intact, 1 chain broken, 2 usage or configuration error
 * (an org that does not exist included), 3 could not verify (database error).
 * The nil UUID names the platform chain (platform keys' events), as it does for
 * platform keys on the API: whoever holds DATABASE_URL has platform scope.
 * Events are sealed first, as the API does, and as there a failed seal is
 * reported and what is sealed still checked; `--no-seal` only reads (for a
 * read-only role), checking what is already sealed. Only the JSON result goes
 * to `out`: diagnostics and logs (see commandLogger) go to `err`.
 */
export async function ledgerVerifyCommand(args: string[], env: NodeJS.ProcessEnv, io: CommandOutput): Promise<number> {
  const orgAt = args.indexOf('--org');
  const orgId = orgAt >= 0 ? args[orgAt + 1] : undefined;
  // An earlier run's checked and headHash, kept elsewhere: the chain must still hold that hash there (checkAnchor).
  const anchorAt = args.indexOf('--anchor');
  const anchor = anchorAt >= 0 ? parseAnchor(args[anchorAt + 1] ?? '') : undefined;
  const unknown = args.filter((a, i) => !(a === '--org' || i === orgAt + 1 || a === '--no-seal' || (anchorAt >= 0 && (i === anchorAt || i === anchorAt + 1))));
  if (!isUuid(orgId) || unknown.length || anchor === null) {
    io.err(USAGE);
    return 2;
  }
  // A malformed URL is a configuration error (2) named as such, not "could not verify" (3) with the driver's "Invalid URL".
  const problem = databaseEnvProblem(env);
  if (problem) {
    io.err(`${problem}\n${USAGE}`);
    return 2;
  }
  // Read as the gateway, migrate and credentials-rotate read it: without the spaces or newline around it, and a
  // value of only spaces is unset.
  let url = CONFIG_SCHEMA.DATABASE_URL.parse(env.DATABASE_URL);
  let mode = CONFIG_SCHEMA.DB_CONNECTION_MODE.parse(env.DB_CONNECTION_MODE);
  if (!url) {
    // A gateway on its embedded database (no DATABASE_URL) in the same DATA_DIR: that database, found as it serves it.
    const dataDir = CONFIG_SCHEMA.DATA_DIR.parse(env.DATA_DIR) as string;
    const embedded = runningEmbeddedDatabaseUrl(dataDir);
    if (embedded && 'refused' in embedded) {
      io.err(`${embedded.refused}\n${USAGE}`);
      return 2;
    }
    if (!embedded) {
      io.err(`DATABASE_URL is required, or a gateway running on its embedded database in DATA_DIR (${dataDir} has none running)\n${USAGE}`);
      return 2;
    }
    io.err(`using the embedded database of the gateway running in ${dataDir} (127.0.0.1:${embedded.port})`);
    url = embedded.url;
    mode = 'direct'; // reached directly, as the gateway reaches it: the settings sent at connect
  }
  const opener = credentialsOpenerOf(env);
  if ('refused' in opener) {
    io.err(`${opener.refused}\n${USAGE}`);
    return 2;
  }
  if (!opener.open) {
    io.err(
      'ledger-verify: no MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS (nor the development key in DATA_DIR): the credentials sealed in each row are ' +
        'not opened and held to their events, as GET /v1/ledger/verify holds them; give the gateway\'s keys for that check',
    );
  }
  let ds: DataSource | undefined;
  try {
    // The gateway's query timeout (and the statement_timeout under it), as credentials:rotate takes it.
    const queryTimeoutMs = CONFIG_SCHEMA.DB_QUERY_TIMEOUT_MS.parse(env.DB_QUERY_TIMEOUT_MS) as number;
    ds = await new DataSource(dbOptions(url, 2, queryTimeoutMs, mode)).initialize();
    // A mistyped id would otherwise verify an empty chain as intact (the API answers 404). An org whose row is gone
    // but whose events are not (its rows deleted around the gateway) is verified: that is a break to report.
    const [org] =
      orgId === NIL_UUID
        ? [true]
        : ((await ds.query('SELECT 1 FROM orgs WHERE id = $1 UNION ALL (SELECT 1 FROM runtime_ledger_events WHERE org_id = $1 LIMIT 1) LIMIT 1', [orgId])) as unknown[]);
    if (!org) {
      io.err(`ledger-verify: no org ${orgId}\n${USAGE}`);
      return 2;
    }
    if (!args.includes('--no-seal')) {
      // The sealer reads its interval from config only when it schedules itself; sealNow needs none.
      await new LedgerSealerService(ds, {} as AppConfig).sealNow().catch((err: unknown) => {
        io.err(`ledger-verify: sealing failed, verifying what is sealed: ${loggableErrorText(err)}`);
      });
    }
    const result: VerifyResult = await checkAnchor(ds, orgId, await verifyOrgChain(ds, orgId, opener.open), anchor);
    io.out(JSON.stringify(result));
    return result.ok ? 0 : 1;
  } catch (err) {
    io.err(`ledger-verify failed: ${loggableErrorText(err)}${poolerHint(err)}`);
    return 3;
  } finally {
    await ds?.destroy();
  }
}

/**
 * The opener of the credentials sealed in each row, as the gateway's verify has it (credentialOpener): the gateway's
 * keys (MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS), else the development key the gateway keeps beside its
 * embedded database (DATA_DIR/master.key, outside production). Without either, none: that one check is left out (and
 * said), as a rollback of a row's ciphertext under its current fingerprint is found only by opening it. No key file
 * is made here.
 */
function credentialsOpenerOf(env: NodeJS.ProcessEnv): { open?: CredentialOpener } | { refused: string } {
  const { raw, problems } = parseRawConfigCollecting(env);
  const keyProblems = problems.filter((p) => p.startsWith('MASTER_ENCRYPTION_') || p.startsWith('DATA_DIR') || p.startsWith('NODE_ENV'));
  if (keyProblems.length) return { refused: keyProblems.join('\n') };
  const keyed = raw.MASTER_ENCRYPTION_KEY !== undefined || raw.MASTER_ENCRYPTION_KEYS !== undefined;
  if (!keyed && (raw.NODE_ENV === 'production' || !existsSync(resolve(raw.DATA_DIR, 'master.key')))) return {};
  const resolved: string[] = [];
  const keyring = resolveKeyring(raw, resolved, []);
  if (resolved.length) return { refused: resolved.join('\n') };
  return { open: credentialOpener(new EnvelopeCipher(keyring)) };
}
