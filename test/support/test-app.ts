import 'reflect-metadata';
import type { Server } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { DataSource } from 'typeorm';
import { createGateway } from '../../src/bootstrap.js';
import { loadConfig, type AppConfig } from '../../src/config/app-config.js';
import { captureLogs, setLogEcho } from '../../src/logging/logging.js';
import { MetricsService } from '../../src/metrics/metrics.service.js';
import { postApiKey } from './api-keys.js';
import { logMetrics, recordingResponses } from './response-log.js';
import { appendToRunLog } from './run-log.js'; // importing it also sends every log line of every in-process app to the run log (the run-wide leak scan)
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from './secrets.js';

export interface TestApp {
  app: INestApplication;
  config: AppConfig;
  ds: DataSource;
  http: TestAgent;
  /** every log line the app wrote */
  logs: string[];
  /** Appends /metrics to the run log (for the leak scan), then closes the app. */
  close(): Promise<void>;
}

/** The gateway as main.ts builds it, on the test database, with logs captured for leak scans. */
export async function startTestApp(env: Record<string, string | undefined> = {}): Promise<TestApp> {
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: process.env.DATABASE_URL,
    MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
    BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
    RATE_LIMIT_RPS: '0',
    AUTH_FAILURE_RPS: '0', // fuzzers send thousands of made-up keys from 127.0.0.1; errors.spec.ts tests the limit
    LOG_LEVEL: 'info',
    DATA_DIR: '.tmp/data-test',
    ...env,
  });
  setLogEcho(process.env.TEST_LOG_ECHO === '1');
  const capture = captureLogs();
  const { app } = await createGateway(config);
  await app.listen(0, '127.0.0.1');
  return {
    app,
    config,
    ds: app.get(DataSource),
    http: recordingResponses(request(app.getHttpServer())), // every response goes to the run log (the leak scan)
    logs: capture.lines,
    close: async () => {
      const address = (app.getHttpServer() as Server).address();
      if (address && typeof address === 'object') await logMetrics(`http://127.0.0.1:${address.port}`);
      // No longer listening (a test began the drain): the same text, rendered in the process.
      else appendToRunLog('metrics', await app.get(MetricsService).render());
      capture.stop();
      await app.close();
    },
  };
}

export const bearer = (key: string): Record<string, string> => ({ Authorization: `Bearer ${key}` });
export const adminAuth = bearer(TEST_ADMIN_KEY);

/** Creates an org and returns its id. */
export async function createOrg(t: TestApp, name = 'Acme'): Promise<string> {
  const res = await t.http.post('/v1/orgs').set(adminAuth).send({ name });
  if (res.status !== 201) throw new Error(`createOrg: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as { id: string }).id;
}

/** Creates a key of `role` for `orgId` (null = platform) and returns the key text and its id. */
export async function createKey(t: TestApp, orgId: string | null, role: string): Promise<{ key: string; id: string }> {
  const res = await postApiKey(t.http, adminAuth, { orgId, role, name: `${role} key` }, 'createKey'); // recorded for the leak scan
  if (res.status !== 201) throw new Error(`createKey: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { key: string; id: string };
}
