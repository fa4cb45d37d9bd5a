import { Global, Module, type DynamicModule } from '@nestjs/common';
import { ApprovalExpiries } from './approvals/approval-expiries.js';
import { ApiKeysService } from './auth/api-keys.service.js';
import { KeyRateLimiter } from './auth/key-rate-limiter.js';
import { Clock } from './common/clock.js';
import { ClockSyncService } from './common/clock-sync.service.js';
import { EnvelopeCipher } from './common/crypto/envelope-cipher.js';
import { ShutdownPhase } from './common/shutdown-phase.js';
import { APP_CONFIG, type AppConfig } from './config/app-config.js';
import { LedgerEventsService } from './ledger/ledger-events.service.js';
import { LedgerSealerService } from './ledger/ledger-sealer.service.js';
import { LedgerVerifierService } from './ledger/ledger-verifier.service.js';
import { MetricsService } from './metrics/metrics.service.js';
import { FeatureFlagsService } from './orgs/feature-flags.service.js';
import { OrgScopeService } from './orgs/org-scope.service.js';
import { ConfiguredSecretsHold } from './redaction/configured-secrets.js';

const SHARED = [
  Clock,
  ShutdownPhase,
  MetricsService,
  ApprovalExpiries,
  LedgerEventsService,
  LedgerSealerService,
  LedgerVerifierService,
  OrgScopeService,
  FeatureFlagsService,
  ApiKeysService,
  KeyRateLimiter,
];

/** Services every feature uses: config, clock, crypto, ledger events, metrics, org scope, keys. */
@Global()
@Module({})
export class CoreModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: CoreModule,
      providers: [
        { provide: APP_CONFIG, useValue: config },
        { provide: EnvelopeCipher, useFactory: () => new EnvelopeCipher(config.keyring) },
        ClockSyncService,
        // A BOOTSTRAP_ADMIN_KEY the operator chose has no tgw_ shape: redaction is told its value while the app runs.
        ConfiguredSecretsHold,
        ...SHARED,
      ],
      exports: [APP_CONFIG, EnvelopeCipher, ...SHARED],
    };
  }
}
