import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { KeyRotationService } from './key-rotation.service.js';

/**
 * At start-up, each loaded master key is tried on a few of the stored secrets labelled with its id (credentials,
 * results, approved inputs, vendor token state). One that opens none of them is not the key this database was
 * written with — a backup restored with another environment's key, a mistyped key — and the gateway says so at once,
 * at error level, instead of leaving it to be guessed from calls failing CREDENTIALS_INVALID. It does not refuse to
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
    let sampled: Awaited<ReturnType<KeyRotationService['sampleLoadedKeys']>>;
    try {
      sampled = await new KeyRotationService(this.ds, this.cipher, this.events).sampleLoadedKeys();
    } catch (err) {
      this.log.warn(`the start-up check of the master keys could not run: ${loggableErrorText(err)}`);
      return;
    }
    for (const k of sampled) {
      if (k.sampled === 0 || k.opened > 0) continue;
      this.log.error(
        { keyId: k.keyId, sampled: k.sampled, tables: k.tables },
        `the master key loaded as "${k.keyId}" opens none of the ${k.sampled} stored secrets labelled "${k.keyId}" it was tried on ` +
          `(${k.tables.join(', ')}): it is not the key this database was written with. Until the gateway runs with the right ` +
          'MASTER_ENCRYPTION_KEY(S), calls needing those credentials fail CREDENTIALS_INVALID, stored results cannot be read, and ' +
          'approved calls wait with their input kept; nothing is deleted',
      );
    }
  }
}
