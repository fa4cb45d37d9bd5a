import 'reflect-metadata';
import { ledgerVerifyCommand } from '../ops/ledger-verify.command.js';

/* eslint-disable no-console -- a command-line tool talks on stdout */

ledgerVerifyCommand(process.argv.slice(2), process.env, { out: (l) => console.log(l), err: (l) => console.error(l) }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`ledger-verify failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(3);
  },
);
