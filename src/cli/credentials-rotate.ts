import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { loadConfig, type AppConfig } from '../config/app-config.js';
import { ConfigError } from '../config/config.schema.js';
import { KeyRotationService } from '../credentials/key-rotation.service.js';
import { dbOptions } from '../db/db-options.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';

/* eslint-disable no-console -- a command-line tool talks on stdout */

/**
 * `npm run credentials:rotate [-- --batch-size=N]`: re-encrypts every stored
 * credential, result and pending approval input under MASTER_ENCRYPTION_ACTIVE_KEY_ID. Safe to re-run
 * and to interrupt. Exit 0 all done (no row under another key: the old key may go), 1 rows are still under
 * other keys (some could not be decrypted, listed by id in the summary, or a writer still on the old key wrote
 * them meanwhile) or the run failed, 2 usage or configuration problem (also: a loaded key id given new material).
 */
async function main(args: string[]): Promise<number> {
  let batchSize = 200;
  for (const arg of args) {
    const m = /^--batch-size=(\d{1,5})$/.exec(arg);
    if (m && Number(m[1]) >= 1) batchSize = Number(m[1]);
    else {
      console.error(`unknown argument ${JSON.stringify(arg.slice(0, 40))}; usage: credentials-rotate [--batch-size=N]`);
      return 2;
    }
  }
  if (!process.env.DATABASE_URL?.trim()) {
    console.error('DATABASE_URL is required: rotation runs against the database the gateway uses (with every master key loaded)');
    return 2;
  }
  if (!process.env.MASTER_ENCRYPTION_KEYS && !process.env.MASTER_ENCRYPTION_KEY) {
    // Without them the configuration would make up a development key (DATA_DIR/master.key) that opens nothing:
    // every row would "fail", which reads as damaged data, and a stray key file would be left behind.
    console.error(
      'MASTER_ENCRYPTION_KEYS (every key in use, e.g. k2:<base64>,k1:<base64>) and MASTER_ENCRYPTION_ACTIVE_KEY_ID (the new one) are required: rotation re-encrypts under the active key',
    );
    return 2;
  }
  if (process.env.MASTER_ENCRYPTION_KEYS && !process.env.MASTER_ENCRYPTION_ACTIVE_KEY_ID) {
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

  const ds = await new DataSource(dbOptions(config.DATABASE_URL!, 2)).initialize();
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
    const mislabelled = await rotation.mislabelledKeyIds();
    if (mislabelled.length > 0) {
      // Rows labelled with the active id are never rotated: they would stay under the old material, lost with it.
      for (const { kind, keyId } of mislabelled) {
        console.error(`key id ${keyId} names different material than its rows (${kind}): give the new key a new id (e.g. k3), keep ${keyId} for the old one`);
      }
      return 2;
    }
    const summary = await rotation.rotate({ batchSize });
    console.log(JSON.stringify(summary));
    const parts = [summary.credentials, summary.results, summary.inputs, summary.tokens];
    const remaining = parts.reduce((n, c) => n + c.remaining, 0);
    const failed = parts.reduce((n, c) => n + c.failed, 0);
    if (remaining === 0 && failed === 0) return 0;
    // Exit 0 is the operator's cue to remove the old key: not while any row still needs one.
    if (remaining > 0) {
      console.error(
        `${remaining} rows still under other keys than ${summary.toKeyId}` +
          (failed > 0 ? ` (${failed} of them no loaded key opens: see failures)` : '') +
          ': re-run; is a writer still using the old key? Do not remove the old key yet',
      );
    }
    return 1;
  } finally {
    await ds.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`credentials-rotate failed: ${loggableErrorText(err)}`);
    process.exit(1);
  },
);
