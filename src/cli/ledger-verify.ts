import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { commandLogger, ledgerVerifyCommand, type CommandOutput } from '../ops/ledger-verify.command.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';

/* eslint-disable no-console -- a command-line tool talks on stdout */

const io: CommandOutput = { out: (l) => console.log(l), err: (l) => console.error(l) };
// stdout is the JSON result alone (`| jq`): the services' logs go to stderr.
Logger.overrideLogger(commandLogger(io));

ledgerVerifyCommand(process.argv.slice(2), process.env, io).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`ledger-verify failed: ${loggableErrorText(err)}`);
    process.exit(3);
  },
);
