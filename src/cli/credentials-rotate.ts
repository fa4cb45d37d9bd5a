import 'reflect-metadata';
import { loadConfig, type AppConfig } from '../config/app-config.js';
import { CONFIG_SCHEMA, ConfigError } from '../config/config.schema.js';
import type { RotationSummary } from '../credentials/key-rotation.service.js';
import { runningEmbeddedDatabaseUrl } from '../db/running-embedded-url.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { randomUUID } from 'node:crypto';
import { hostname, userInfo } from 'node:os';

/* eslint-disable no-console -- a command-line tool talks on stdout */

/**
 * `npm run credentials:rotate [-- --batch-size=N]`: re-encrypts every stored
 * credential, result and pending approval input under MASTER_ENCRYPTION_ACTIVE_KEY_ID. Safe to re-run
 * and to interrupt. Exit 0 all done (no row under another key: the old key may go), 1 rows are still under
 * other keys (some could not be decrypted, listed by id in the summary: rows labelled with the active id that the
 * key loaded under it does not open included; or a writer still on the old key wrote them meanwhile) or the run
 * failed, 2 usage or configuration problem (also: a loaded key id given new material).
 */
/**
 * Who is running this, for the rotation's events (RotationOperator): the host and the operating system user. A user
 * with no name (a container's uid with no passwd entry) is named by its uid.
 */
function operator(): { command: string; host: string; user: string } {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = `uid ${process.getuid?.() ?? 'unknown'}`;
  }
  return { command: 'credentials:rotate', host: hostname().slice(0, 255), user: user.slice(0, 255) };
}

async function main(args: string[]): Promise<number> {
  let batchSize = 200;
  for (const [i, arg] of args.entries()) {
    const m = /^--batch-size=(\d{1,5})$/.exec(arg);
    if (m && Number(m[1]) >= 1) batchSize = Number(m[1]);
    else {
      console.error(`unknown argument ${unknownArgument(i, arg)}; usage: credentials-rotate [--batch-size=N] (the environment goes before the command)`);
      return 2;
    }
  }
  if (!process.env.DATABASE_URL?.trim()) {
    // A gateway on its embedded database (no DATABASE_URL) in the same DATA_DIR: that database, found as it serves it.
    const dataDir = CONFIG_SCHEMA.DATA_DIR.parse(process.env.DATA_DIR) as string;
    const embedded = runningEmbeddedDatabaseUrl(dataDir);
    if (embedded && 'refused' in embedded) {
      console.error(embedded.refused);
      return 2;
    }
    if (!embedded) {
      console.error(
        'DATABASE_URL is required: rotation runs against the database the gateway uses (with every master key loaded); ' +
          `for a gateway on its embedded database, run this beside it while it runs, with its DATA_DIR (${dataDir} has none running)`,
      );
      return 2;
    }
    console.error(`using the embedded database of the gateway running in ${dataDir} (127.0.0.1:${embedded.port})`);
    process.env.DATABASE_URL = embedded.url;
    process.env.DB_CONNECTION_MODE = 'direct'; // reached directly, as the gateway reaches it: the settings sent at connect
  }
  // Read as the configuration reads them (as src/cli/migrate.ts does): without the spaces around, a blank one unset.
  const env = (name: 'MASTER_ENCRYPTION_KEYS' | 'MASTER_ENCRYPTION_KEY' | 'MASTER_ENCRYPTION_ACTIVE_KEY_ID') => CONFIG_SCHEMA[name].parse(process.env[name]);
  if (!env('MASTER_ENCRYPTION_KEYS') && !env('MASTER_ENCRYPTION_KEY')) {
    // Without them the configuration would make up a development key (DATA_DIR/master.key) that opens nothing:
    // every row would "fail", which reads as damaged data, and a stray key file would be left behind.
    console.error(
      (env('MASTER_ENCRYPTION_ACTIVE_KEY_ID') ? 'MASTER_ENCRYPTION_ACTIVE_KEY_ID is set but no key is: ' : '') +
        'MASTER_ENCRYPTION_KEYS (every key in use, e.g. k2:<base64>,k1:<base64>) and MASTER_ENCRYPTION_ACTIVE_KEY_ID (the new one) are required: rotation re-encrypts under the active key',
    );
    return 2;
  }
  if (env('MASTER_ENCRYPTION_KEYS') && !env('MASTER_ENCRYPTION_ACTIVE_KEY_ID')) {
    // The configuration would make the first listed key active: with "k1:<old>,k2:<new>" the run would re-encrypt
    // everything back under the old key, and removing it afterwards would strand every row. (MASTER_ENCRYPTION_KEY
    // alone is one key, k1: nothing to choose between.)
    console.error(
      'MASTER_ENCRYPTION_ACTIVE_KEY_ID is required with MASTER_ENCRYPTION_KEYS: name the key to re-encrypt under (the new one), e.g. MASTER_ENCRYPTION_ACTIVE_KEY_ID=k2',
    );
    return 2;
  }
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 2;
    }
    throw err;
  }
  for (const w of config.warnings) console.error(`warning: ${w}`);
  // A rotation to a key loaded under another id too would relabel every row and exit 0 (the cue to remove the old id)
  // while the key being retired still opens them all: the old key pasted for the new one.
  const active = config.keyring.keys.get(config.keyring.activeKeyId);
  const twin = [...config.keyring.keys].find(([id, key]) => id !== config.keyring.activeKeyId && active?.equals(key))?.[0];
  if (twin !== undefined) {
    console.error(
      `the active key ${config.keyring.activeKeyId} is the same key as ${twin}: rotating to it would change nothing, and ${twin}'s key would still open every row. ` +
        'Load the new key under the active id; nothing was written',
    );
    return 2;
  }

  // TypeORM, the entities and the services load only now (about a second): a usage or configuration mistake above is
  // answered at once.
  const [{ DataSource }, { dbOptions }, { EnvelopeCipher }, { ForeignActiveKeyError, KeyRotationService, MislabelledKeyIdError }, { LedgerEventsService }] =
    await Promise.all([
      import('typeorm'),
      import('../db/db-options.js'),
      import('../common/crypto/envelope-cipher.js'),
      import('../credentials/key-rotation.service.js'),
      import('../ledger/ledger-events.service.js'),
    ]);
  const ds = await new DataSource(dbOptions(config.DATABASE_URL!, 2, config.DB_QUERY_TIMEOUT_MS, config.DB_CONNECTION_MODE)).initialize();
  try {
    const [{ ready }] = (await ds.query(
      `SELECT to_regclass('integration_credentials') IS NOT NULL AND to_regclass('tool_call_results') IS NOT NULL
          AND to_regclass('runtime_ledger_events') IS NOT NULL AND to_regclass('vendor_tokens') IS NOT NULL AS ready`,
    )) as [{ ready: boolean }];
    if (!ready) {
      console.error('the schema does not exist in this database: run `npm run migration:run` (or start the gateway once) first');
      return 2;
    }
    const rotation = new KeyRotationService(ds, new EnvelopeCipher(config.keyring), new LedgerEventsService(ds));
    let summary: RotationSummary;
    try {
      // Said before anything is written: a run that dies midway (a kill, a lost connection) printed no summary, and its
      // batches' credentials.rotated events are found by this id.
      const rotationId = randomUUID();
      console.error(`rotation ${rotationId} started: its credentials.rotated events carry this rotationId`);
      summary = await rotation.rotate({ batchSize, by: operator(), rotationId });
    } catch (err) {
      if (err instanceof ForeignActiveKeyError) {
        console.error(
          `the key loaded as ${err.keyId} opens none of the ${err.rows} rows labelled ${err.keyId} (${err.kinds.join(', ')}): it is not the key the gateway seals with as ${err.keyId}. ` +
            `Load the same ${err.keyId} the replicas have (and the old key under its own id), then re-run; nothing was written`,
        );
        return 2;
      }
      if (!(err instanceof MislabelledKeyIdError)) throw err;
      // Rows labelled with the active id are never rotated: they would stay under the old material, lost with it.
      // Thrown before anything was written.
      for (const { kind, keyId } of err.found.filter((f) => !f.rowKeyId)) {
        console.error(`key id ${keyId} names different material than its rows (${kind}): give the new key a new id (e.g. k3), keep ${keyId} for the old one`);
      }
      // The active key opens rows labelled with an id that is not loaded: re-encrypted, they would be relabelled with
      // the active id, which the replicas read with other material. Thrown before the batch holding such a row was written.
      const byLabel = new Map<string, string[]>();
      for (const { kind, rowKeyId } of err.found) if (rowKeyId) byLabel.set(rowKeyId, [...(byLabel.get(rowKeyId) ?? []), kind]);
      for (const [label, kinds] of byLabel) {
        const active = err.found[0].keyId;
        console.error(
          `the key loaded as ${active} opens rows labelled ${label} (${kinds.join(', ')}): the gateway calls it ${label}, and rotating would relabel them ${active}, ` +
            `which the replicas read with another key. Load it under its id, with the old key under its own ` +
            `(e.g. MASTER_ENCRYPTION_KEYS=${label}:<new>,${active}:<old> MASTER_ENCRYPTION_ACTIVE_KEY_ID=${label}), then re-run; ` +
            (err.rotated > 0 ? `${err.rotated} rows opened by their own key were rotated before it stopped (right as they are)` : 'nothing was written'),
        );
      }
      return 2;
    }
    console.log(JSON.stringify(summary));
    const parts = [summary.credentials, summary.results, summary.inputs, summary.tokens];
    const remaining = parts.reduce((n, c) => n + c.remaining, 0);
    const failed = parts.reduce((n, c) => n + c.failed, 0);
    if (remaining === 0 && failed === 0) return 0;
    // Exit 0 is the operator's cue to remove the old key: not while any row still needs one.
    // The active id's rows are checked first, so the (capped) failures list holds them if there are any.
    const underActive = summary.failures.some((f) => f.keyId === summary.toKeyId);
    if (underActive) {
      console.error(
        `rows labelled ${summary.toKeyId} do not open with the key loaded as ${summary.toKeyId} (see failures): it is not the key they were sealed under. ` +
          `Load that key too, under its id, and the new one under a new id (e.g. MASTER_ENCRYPTION_KEYS=k2:<new>,k1:<old> MASTER_ENCRYPTION_ACTIVE_KEY_ID=k2), then re-run`,
      );
    }
    if (remaining > 0) {
      console.error(
        `${remaining} rows still under other keys than ${summary.toKeyId}` +
          (failed > 0 ? ` (${failed} of them no loaded key opens: see failures)` : '') +
          (underActive ? ':' : ': re-run; is a writer still using the old key?') +
          ' Do not remove the old key yet',
      );
    }
    return 1;
  } finally {
    await ds.destroy();
  }
}

/**
 * How an unknown argument is named: by its position, never its text (an environment variable given after `--`
 * by mistake carries a password or a master key). Only a flag's name (`--batch-size` of `--batch-size=zero`), or
 * the name of a configuration variable given as NAME=value, is shown.
 */
function unknownArgument(index: number, arg: string): string {
  const flag = /^(--?[a-z][a-z0-9-]{0,39})(?:=|$)/.exec(arg)?.[1];
  const variable = /^([A-Z][A-Z0-9_]{0,63})=/.exec(arg)?.[1];
  const name = flag ?? (variable && Object.hasOwn(CONFIG_SCHEMA, variable) ? variable : undefined);
  return `#${index + 1}` + (name ? ` (${name}${arg.length > name.length ? '=…' : ''})` : '');
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  async (err: unknown) => {
    const hint = await import('../db/database-probe.js').then(({ poolerHint }) => poolerHint(err), () => '');
    console.error(`credentials-rotate failed: ${loggableErrorText(err)}${hint}`);
    process.exit(1);
  },
);
