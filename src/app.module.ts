import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, DiscoveryModule } from '@nestjs/core';
import { ConditionalWritesGuard } from './common/http/conditional-writes.guard.js';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LoggerModule } from 'nestjs-pino';
import { ApiKeysController } from './auth/api-keys.controller.js';
import { AuthGuard } from './auth/auth.guard.js';
import { ProblemFilter } from './common/errors/problem.filter.js';
import type { AppConfig } from './config/app-config.js';
import { CoreModule } from './core.module.js';
import { dbOptions } from './db/db-options.js';
import { HealthController } from './health/health.controller.js';
import { StopNotice } from './health/stop-notice.js';
import { pinoHttpOptions } from './logging/logging.js';
import { OrgsController } from './orgs/orgs.controller.js';
import { OrgsService } from './orgs/orgs.service.js';
import { ToolGatewayModules } from './feature-modules.js';

export interface AppModuleOptions {
  /** Tests only: extra controllers (e.g. one that throws, to prove 500s say nothing inside). */
  extraControllers?: Type[];
}

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, opts: AppModuleOptions = {}): DynamicModule {
    if (!config.DATABASE_URL) throw new Error('DATABASE_URL must be resolved before the app module is built');
    return {
      module: AppModule,
      imports: [
        CoreModule.forRoot(config),
        DiscoveryModule,
        // useExisting: configureApp mounts pino-http (requestLog) ahead of every other middleware; Nest's copy would
        // come after them all. The module still builds the logger for logs made outside a request.
        LoggerModule.forRoot({ pinoHttp: pinoHttpOptions(config), useExisting: true }),
        TypeOrmModule.forRoot(dbOptions(config.DATABASE_URL, config.DB_POOL_SIZE, config.DB_QUERY_TIMEOUT_MS, config.DB_CONNECTION_MODE)),
        ...ToolGatewayModules,
      ],
      controllers: [HealthController, ApiKeysController, OrgsController, ...(opts.extraControllers ?? [])],
      providers: [
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: ConditionalWritesGuard }, // after the AuthGuard: preconditions of an admitted request
        { provide: APP_FILTER, useClass: ProblemFilter },
        OrgsService,
        StopNotice,
      ],
    };
  }
}
