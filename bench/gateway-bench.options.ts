/**
 * The gateway benchmark's command line (`npm run bench -- --help`) and the
 * environment it starts the gateway with.
 */
import { parseArgs } from 'node:util';
import { parseLogLevel, type LogLevel } from './gateway-bench.checks.js';
import { BENCH_ADMIN_KEY, BENCH_MASTER_KEY } from './gateway-bench.setup.js';

const HELP = `usage: npm run bench -- [options]
  --duration S        seconds per target per round (default 10)
  --rounds N          interleaved rounds per connection count (default 3)
  --connections N     connections of the main pass (default 16); a 1-connection pass follows
  --warmup S          warm-up seconds per target before the rounds (default 3)
  --pool N            the gateway's DB_POOL_SIZE (default 20)
  --workers N         N gateway processes sharing the port via node:cluster (default 1):
                      what N replicas on this machine do; CPU and RSS are their sums
  --gateway-env K=V   extra gateway environment (repeatable), e.g. VENDOR_CONCURRENCY_LIMIT=32
  --profile DIR       run the gateway with --cpu-prof and write its V8 CPU profile to DIR
  --log-level L       the gateway's LOG_LEVEL (default warn, so results stay comparable with
                      earlier runs; production's default is info: a request log line per call)
  --soak              soak mode instead: allowed calls at a fixed rate
  --soak-seconds S    soak length (default 300)
  --soak-rate N       calls per second (default 300)
  --soak-warmup S     warm-up before the RSS baseline is taken (default 60: V8 sizes its heap for the load in the first minute)
  --soak-connections N  connections of the soak (default 8). autocannon paces a rate per
                      connection per second, so each second starts with a burst of up to N
                      concurrent calls; 8 = the default VENDOR_CONCURRENCY_LIMIT
env: DATABASE_URL  a server to create (and drop) a scratch database on; default: embedded PostgreSQL`;

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

export interface Options {
  duration: number;
  rounds: number;
  connections: number;
  warmup: number;
  pool: number;
  workers: number;
  gatewayEnv: Record<string, string>;
  profileDir: string | undefined;
  /** the gateway's LOG_LEVEL */
  logLevel: LogLevel;
  soak: boolean;
  soakSeconds: number;
  soakRate: number;
  soakConnections: number;
  soakWarmup: number;
}

export function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '16' },
      warmup: { type: 'string', default: '3' },
      pool: { type: 'string', default: '20' },
      workers: { type: 'string', default: '1' },
      'gateway-env': { type: 'string', multiple: true, default: [] },
      profile: { type: 'string' },
      'log-level': { type: 'string', default: 'warn' },
      soak: { type: 'boolean', default: false },
      'soak-seconds': { type: 'string', default: '300' },
      'soak-rate': { type: 'string', default: '300' },
      'soak-connections': { type: 'string', default: '8' },
      'soak-warmup': { type: 'string', default: '60' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    log(HELP);
    process.exit(0);
  }
  const num = (name: string, raw: string, min: number): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min}, got "${raw}"`);
    return n;
  };
  const gatewayEnv: Record<string, string> = {};
  for (const kv of values['gateway-env']) {
    const i = kv.indexOf('=');
    if (i < 1) throw new Error(`--gateway-env wants KEY=VALUE, got "${kv}"`);
    gatewayEnv[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return {
    duration: num('duration', values.duration, 1),
    rounds: Math.floor(num('rounds', values.rounds, 1)),
    connections: Math.floor(num('connections', values.connections, 1)),
    warmup: num('warmup', values.warmup, 0),
    pool: Math.floor(num('pool', values.pool, 1)),
    workers: Math.floor(num('workers', values.workers, 1)),
    gatewayEnv,
    profileDir: values.profile,
    logLevel: parseLogLevel(values['log-level']),
    soak: values.soak,
    soakSeconds: Math.floor(num('soak-seconds', values['soak-seconds'], 1)),
    soakRate: Math.floor(num('soak-rate', values['soak-rate'], 1)),
    soakConnections: Math.floor(num('soak-connections', values['soak-connections'], 1)),
    soakWarmup: Math.floor(num('soak-warmup', values['soak-warmup'], 1)),
  };
}

export function gatewayEnvFor(dbUrl: string, emulatorUrl: string, o: Options): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    PORT: '0',
    HOST: '127.0.0.1',
    // warn by default (--log-level): every session's numbers were measured so; production's
    // default, info, adds one request log line per call.
    LOG_LEVEL: o.logLevel,
    DATABASE_URL: dbUrl,
    DB_POOL_SIZE: String(o.pool),
    DATA_DIR: '.tmp/bench-gateway-data',
    MASTER_ENCRYPTION_KEY: BENCH_MASTER_KEY,
    BOOTSTRAP_ADMIN_KEY: BENCH_ADMIN_KEY,
    RATE_LIMIT_RPS: '0',
    // One org drives all the load here; the per org × vendor in-flight limit (default 8)
    // would refuse by design what 16 connections send, so the bench raises it.
    VENDOR_CONCURRENCY_LIMIT: '64',
    // Vendor base URLs at the emulator (server config, as in production).
    SHOPIFY_BASE_URL: emulatorUrl,
    AMAZON_LWA_URL: `${emulatorUrl}/auth/o2/token`,
    AMAZON_SPAPI_BASE_URL: emulatorUrl,
    JUMIO_AUTH_BASE_URL: emulatorUrl,
    JUMIO_RETRIEVAL_BASE_URL: emulatorUrl,
    NANGO_HOST: emulatorUrl,
    ...o.gatewayEnv,
  };
}
