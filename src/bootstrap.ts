import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { AppModule, type AppModuleOptions } from './app.module.js';
import { configureApp } from './app.setup.js';
import { ApiKeysService } from './auth/api-keys.service.js';
import type { AppConfig } from './config/app-config.js';

const MIGRATION_LOCK = 7_413_920_552;

/**
 * Runs pending migrations once even when several replicas start together: the
 * others wait on the advisory lock for as long as the first one migrates (an
 * index build on a large table outlasts the pool's statement timeout, which
 * would otherwise cancel the wait and crash them).
 */
export async function runMigrations(ds: DataSource): Promise<void> {
  const qr = ds.createQueryRunner();
  await qr.connect();
  try {
    await qr.query('SET statement_timeout = 0');
    await qr.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await ds.runMigrations({ transaction: 'each' });
  } finally {
    await qr.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    // The connection goes back to the pool: with the pool's own timeout again.
    await qr.query('RESET statement_timeout').catch(() => undefined);
    await qr.release();
  }
}

export interface Gateway {
  app: INestApplication;
  generatedAdminKey?: string;
}

/** Builds the app, migrates the database and makes sure an admin key exists. Does not listen. */
export async function createGateway(config: AppConfig, opts: AppModuleOptions = {}): Promise<Gateway> {
  const app = await NestFactory.create(AppModule.forRoot(config, opts), { bodyParser: false, bufferLogs: true, abortOnError: false });
  configureApp(app);
  await runMigrations(app.get(DataSource));
  const { generatedKey } = await app.get(ApiKeysService).ensureBootstrapKey();
  await app.init();
  return { app, generatedAdminKey: generatedKey };
}
