/**
 * Runnable vendor emulator for the local demo and the benchmark:
 *   EMULATOR_PORT=4010 node dist/src/emulator/main.js
 * Point SHOPIFY_BASE_URL, AMAZON_SPAPI_BASE_URL, JUMIO_AUTH_BASE_URL,
 * JUMIO_RETRIEVAL_BASE_URL and NANGO_HOST at the URL it prints, and
 * AMAZON_LWA_URL at {url}/auth/o2/token.
 */
import { createFullEmulator } from './index.js';

const raw = process.env.EMULATOR_PORT ?? '4010';
const port = Number(raw);
if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  process.stderr.write(`EMULATOR_PORT must be a port number (0-65535), got "${raw}"\n`);
  process.exit(1);
}

const emulator = createFullEmulator();
emulator.recordLimit = 100_000;
const url = await emulator.start(port);
process.stdout.write(`vendor emulator listening on ${url}\n`);

const shutdown = (): void => {
  void emulator.stop().then(() => process.exit(0));
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
