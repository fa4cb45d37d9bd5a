import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { KeyRotationService, type KeyLabelSample } from './key-rotation.service.js';

/**
 * At start-up, a few of the stored secrets under each key id they are labelled with (credentials, approved inputs,
 * vendor token state) are tried with the loaded keys. A loaded key that opens none of its rows, or rows under an id no
 * loaded key has and none opens, mean the gateway does not have the key this database was written with — a backup
 * restored with another environment's key, a mistyped key — and it says so at once, at error level, instead of
 * leaving it to be guessed from calls failing CREDENTIALS_INVALID. It does not refuse to
 * start: nothing is lost meanwhile (approved calls wait with their input kept, ApprovedCallRunner), and starting with
 * the right key mends everything.
 */
@Injectable()
export class MasterKeyCheck implements OnApplicationBootstrap {
  private readonly log = new Logger('MasterKeys');

  constructor(
    private readonly ds: DataSource,
    private readonly cipher: EnvelopeCipher,
    private readonly events: LedgerEventsService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    let samples: KeyLabelSample[];
    try {
      samples = await new KeyRotationService(this.ds, this.cipher, this.events).sampleLabels();
    } catch (err) {
      this.log.warn(`the start-up check of the master keys could not run: ${loggableErrorText(err)}`);
      return;
    }
    const consequences =
      'Until the gateway runs with the right MASTER_ENCRYPTION_KEY(S), calls needing those credentials fail CREDENTIALS_INVALID, stored ' +
      'results cannot be read, and approved calls wait with their input kept; nothing is deleted';
    for (const k of samples) {
      const where = `(${k.tables.join(', ')})`;
      if (k.sampled === 0) continue;
      if (k.loaded && k.opened === 0) {
        this.log.error(
          { keyId: k.keyId, sampled: k.sampled, tables: k.tables },
          `the master key loaded as "${k.keyId}" opens none of the ${k.sampled} stored secrets labelled "${k.keyId}" it was tried on ${where}: ` +
            `it is not the key this database was written with. ${consequences}`,
        );
      } else if (!k.loaded && k.opened === 0) {
        this.log.error(
          { keyId: k.keyId, sampled: k.sampled, tables: k.tables, loadedKeyIds: this.cipher.keyIds },
          `stored secrets are labelled "${k.keyId}" ${where}, a key id this gateway has not loaded, and none of its keys opens them: ` +
            `load the key they were written with as "${k.keyId}" (MASTER_ENCRYPTION_KEYS). ${consequences}`,
        );
      } else if (!k.loaded) {
        this.log.warn(
          { keyId: k.keyId, openedBy: k.openedBy, tables: k.tables },
          `the key loaded as "${k.openedBy.join('", "')}" opens stored secrets labelled "${k.keyId}" ${where}: load it as "${k.keyId}", the id its rows were written under`,
        );
      }
    }
  }
}
