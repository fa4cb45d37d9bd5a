/**
 * The whole runtime configuration: one declarative schema, parsed once at boot.
 * Every variable here is documented in .env.example (a test keeps them in step).
 * A variable marked `sensitive` is never logged or echoed in an error message.
 */
import { existsSync } from 'node:fs';
import { readDatabaseUrl } from '../db/database-url.js';
import { DB_CONNECTION_MODES, DEFAULT_QUERY_TIMEOUT_MS, type DbConnectionMode } from '../db/session-settings.js';

/** What the auth guard accepts as a bearer key (src/auth/auth.guard.ts): printable ASCII without spaces, at most 512 characters. */
export const API_KEY_MAX_LENGTH = 512;
const API_KEY_CHARS = /^[\x21-\x7e]+$/;

export type NodeEnv = 'development' | 'test' | 'production';

/** SP-API Orders versions the Amazon handler speaks (VENDORS.md §2.2, §2.5). */
export const AMAZON_ORDERS_APIS = ['v0', '2026-01-01'] as const;
export type AmazonOrdersApi = (typeof AMAZON_ORDERS_APIS)[number];

interface VarSpec<T> {
  description: string;
  sensitive?: boolean;
  /** Returns the parsed value, or throws a message describing what is wrong. */
  parse: (raw: string | undefined, env: NodeJS.ProcessEnv) => T;
}

/**
 * The value as given, without the spaces around it (a .env line "X= value ", a value pasted with its newline),
 * or the default when there is none. `new URL` would drop them silently while the raw value kept them: a base
 * URL's trailing "/" then stayed, and every vendor path began "/%20/".
 */
function given(raw: string | undefined, def?: string): string | undefined {
  const v = raw?.trim();
  return v === undefined || v === '' ? def : v;
}
function str(def?: string) {
  return (raw: string | undefined): string | undefined => given(raw, def);
}
function req(def?: string) {
  return (raw: string | undefined): string => {
    const v = given(raw, def);
    if (v === undefined) throw new Error('is required');
    return v;
  };
}
function int(def: number, min: number, max: number) {
  return (raw: string | undefined): number => {
    const v = given(raw);
    if (v === undefined) return def;
    if (!/^-?\d+$/.test(v)) throw new Error(`must be an integer, got "${raw}"`);
    const n = Number(v);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}
function oneOf<T extends string>(def: T, values: readonly T[]) {
  return (raw: string | undefined): T => {
    const v = given(raw, def) as T;
    if (!values.includes(v)) throw new Error(`must be one of ${values.join(', ')}, got "${raw}"`);
    return v;
  };
}
function url(def?: string) {
  return (raw: string | undefined): string | undefined => {
    const v = given(raw, def);
    if (v === undefined) return undefined;
    // The per-region and per-shop defaults (https://auth.{region}.jumio.ai, https://{shopDomain}) are the gateway's
    // own, used when the variable is unset: a value is one fixed URL, which every org's calls go to. A placeholder
    // copied into it is never filled in (every call failed at run time); a query or fragment would swallow the paths
    // the gateway appends (a Shopify call went to POST /).
    if (/[{}]/.test(v)) throw new Error('must be one fixed URL: a {placeholder} is not filled in (leave the variable unset for the per-region or per-shop default)');
    let parsed: URL;
    try {
      parsed = new URL(v);
    } catch {
      // Quoted without everything up to its last "@": a proxy URL with a password and a mistyped port, or a password
      // holding "#", "/" or "?" (what makes it unparsable), would print the password.
      throw new Error(`must be an absolute URL, got "${v.replace(/^([a-z][a-z0-9+.-]*:\/\/).*@/is, '$1…@')}"`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('must be an http(s) URL');
    // An "@" in the path too: a password holding an unencoded "/" (`https://svc:2024/pw@proxy`) parses as host and port.
    if (parsed.username || parsed.password || parsed.pathname.includes('@')) throw new Error('must not hold a user name or password');
    if (v.includes('?') || v.includes('#')) throw new Error('must have no query or fragment: the gateway appends its paths to it');
    return v.replace(/\/+$/, '');
  };
}

/**
 * A DATABASE_URL whose authority ends in a port that is not one (past 65535, or not digits): said as such, not as
 * unencoded characters in the password. Reads only what follows the last "@" before the path; never quotes the value.
 */
function databasePortProblem(v: string): Error | undefined {
  const rest = v.replace(/^postgres(?:ql)?:\/\//, '');
  const end = rest.search(/[/?#]/);
  // An "@" past the first / ? or #: the password holds one of those unencoded, and the "port" is a piece of it.
  if (end !== -1 && rest.slice(end).includes('@')) return undefined;
  const authority = end === -1 ? rest : rest.slice(0, end);
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1);
  const port = /^(?:\[[^\]]*\]|[^:]*):(.*)$/.exec(hostPort)?.[1];
  if (port === undefined || port === '') return undefined;
  if (!/^\d+$/.test(port) || Number(port) > 65535) return new Error('must name a port from 1 to 65535 after the host');
  return undefined;
}

export const CONFIG_SCHEMA = {
  NODE_ENV: { description: 'development, test or production', parse: oneOf<NodeEnv>('development', ['development', 'test', 'production']) },
  PORT: { description: 'HTTP port', parse: int(3000, 0, 65535) },
  HOST: { description: 'HTTP bind address', parse: req('0.0.0.0') },
  LOG_LEVEL: { description: 'pino log level', parse: oneOf('info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) },
  DATABASE_URL: {
    description: 'PostgreSQL URL; when unset an embedded PostgreSQL is started with its data in DATA_DIR',
    sensitive: true,
    parse: (raw: string | undefined) => {
      // Read like every other value: a trailing newline (a secret mounted from a file) would otherwise end up in the
      // database name, and the start fail later with `database "postgres\n" does not exist`.
      const v = given(raw);
      if (v === undefined) return undefined;
      if (!/^postgres(ql)?:\/\//.test(v)) throw new Error('must be a postgres:// URL');
      // The driver reads it as a URL, then percent-decodes the user and password: an unencoded #, %, @ or / there
      // fails only at the first connection, with a message that names nothing. Never echo the value (the password).
      const bad = new Error('must be a valid URL: percent-encode special characters (such as # % @ / ? :) in the user name and password');
      // The Unix-socket form has no host (postgres://user@/db?host=/var/run/postgresql), which the driver reads and
      // WHATWG URL refuses: checked with a stand-in host (readDatabaseUrl).
      let url: URL;
      try {
        url = readDatabaseUrl(v);
        decodeURIComponent(url.username);
        decodeURIComponent(url.password);
      } catch {
        throw databasePortProblem(v) ?? bad;
      }
      // An "@" past the authority: a password holding an unencoded "/" (`user:2024/pw@host`) parses as host `user`, port
      // 2024 and a path holding the rest of the password and the real host, which messages naming the database print.
      if (url.hash !== '' || url.pathname.includes('@') || url.search.includes('@')) throw bad;
      // The driver reads these files as it builds each client: one missing failed start-up with a bare ENOENT.
      for (const param of ['sslrootcert', 'sslcert', 'sslkey']) {
        const file = url.searchParams.get(param);
        if (file !== null && !existsSync(file)) throw new Error(`names ${param}=${file}, which does not exist`);
      }
      return v;
    },
  },
  DB_POOL_SIZE: { description: 'database connections per gateway process', parse: int(20, 2, 500) },
  DB_QUERY_TIMEOUT_MS: {
    description:
      'a statement the database does not answer within this (a network partition, a frozen host) fails as DATABASE_UNAVAILABLE and its connection is dropped; ' +
      'the server-side statement_timeout is kept below it (15 s, or 1 s less)',
    parse: int(DEFAULT_QUERY_TIMEOUT_MS, 1_000, 600_000),
  },
  DB_CONNECTION_MODE: {
    description:
      'direct: DATABASE_URL is PostgreSQL itself; every connection sends the session settings the gateway needs as startup parameters. pooled: a ' +
      "connection pooler stands between (PgBouncer in session or transaction mode, AWS RDS Proxy, Neon's pooler, Supavisor): no startup parameters beyond the user, " +
      'database and application name, no named prepared statements; the role must set the settings, which start-up checks',
    parse: oneOf<DbConnectionMode>('direct', DB_CONNECTION_MODES),
  },
  HTTP_REQUEST_TIMEOUT_MS: {
    description:
      'a request whose headers and body have not all arrived within this is answered 408 and its connection closed: a stalled or trickled upload ' +
      'holds a connection and its buffered body no longer (the headers alone get at most 60 s, or this if less); answers may take longer (a long-poll), ' +
      'but a connection whose answers wait to be sent and of which the client reads nothing for this long is closed',
    parse: int(30_000, 1_000, 300_000),
  },
  DATA_DIR: { description: 'local folder for the embedded database and generated development secrets', parse: req('.data') },
  MASTER_ENCRYPTION_KEY: {
    description: 'base64 of 32 bytes; the single credential/result encryption key (id k1). Required in production unless MASTER_ENCRYPTION_KEYS is set',
    sensitive: true,
    parse: str(),
  },
  MASTER_ENCRYPTION_KEYS: { description: 'for rotation: "k2:<base64>,k1:<base64>"', sensitive: true, parse: str() },
  MASTER_ENCRYPTION_ACTIVE_KEY_ID: { description: 'id of the key new ciphertexts use (with MASTER_ENCRYPTION_KEYS)', parse: str() },
  BOOTSTRAP_ADMIN_KEY: {
    description: 'platform admin API key (32-512 printable ASCII characters, no spaces); in development one is generated and printed once when unset',
    sensitive: true,
    parse: (value: string | undefined) => {
      // Read like every other value: a key mounted from a file ends in a newline, and one of only spaces is unset.
      const raw = given(value);
      if (raw === undefined) return undefined;
      // Never quote the value: the key is a secret. The bounds are the ones the auth guard accepts in an
      // `Authorization: Bearer` header (printable ASCII without spaces, at most 512): any other key would be
      // stored at start-up and then answered 401 on every request.
      if (raw.length < 32) throw new Error('must be at least 32 characters');
      if (raw.length > API_KEY_MAX_LENGTH) throw new Error(`must be at most ${API_KEY_MAX_LENGTH} characters (longer keys are never accepted in an Authorization header)`);
      if (!API_KEY_CHARS.test(raw)) {
        throw new Error('may contain only printable ASCII characters without spaces (0x21-0x7e); a key with spaces, control or non-ASCII characters could never authenticate');
      }
      // Quotes kept from an env file (.env.example quotes a key holding "$"; `docker run --env-file` and kubectl's
      // --from-env-file keep them): the key stored would be the quoted text, and the key as meant answered 401.
      if (/^(['"]).*\1$/s.test(raw)) throw new Error('is quoted: the quotes would be part of the key (remove them where the environment is set; an env file read by docker or kubectl keeps them)');
      return raw;
    },
  },
  RATE_LIMIT_RPS: { description: 'per API key requests per second (burst twice that); 0 disables', parse: int(50, 0, 1_000_000) },
  TRUST_PROXY_HOPS: {
    description:
      'reverse proxies in front of the gateway whose X-Forwarded-For it trusts for the client address (AUTH_FAILURE_RPS meters per client); 0: the peer address',
    parse: int(0, 0, 10),
  },
  HTTP_KEEP_ALIVE_TIMEOUT_MS: {
    description:
      'an idle keep-alive connection is closed after this long; keep it above the idle timeout of a load balancer or proxy in front ' +
      '(AWS ALB and nginx: 60 s), else a request it sends on a connection the gateway is closing is lost (502 there)',
    parse: int(65_000, 1_000, 3_600_000),
  },
  HTTP_MAX_HEADER_BYTES: {
    description:
      'the largest request line and headers taken, in bytes; larger is answered 431. Node\'s 16 KiB by default; a load balancer in front ' +
      'may pass more (AWS ALB: 64 KiB), which the gateway would refuse with 431 where the balancer let it through',
    parse: int(16_384, 4_096, 65_536),
  },
  SHUTDOWN_DELAY_MS: {
    description:
      'on a stop signal, /readyz answers 503 for this long while requests are still served, before the drain closes the listener: ' +
      'time for a load balancer or Kubernetes to take the replica out of rotation (5000-15000 there); 0: drain at once',
    parse: int(0, 0, 120_000),
  },
  HTTP_PIPELINE_DEPTH: {
    description:
      'requests one connection may have unanswered (HTTP/1.1 pipelining); a client that sends more without reading the answers is disconnected, so it cannot make the gateway hold an answer for each in memory',
    parse: int(64, 1, 10_000),
  },
  AUTH_FAILURE_RPS: {
    description: 'per client address (IPv6: per /64), database lookups that find no API key per second (burst twice that) before 429; 0 disables',
    parse: int(10, 0, 1_000_000),
  },
  VENDOR_TIMEOUT_MS: { description: 'total time allowed for one vendor call', parse: int(15_000, 50, 600_000) },
  VENDOR_CONNECT_TIMEOUT_MS: { description: 'time allowed to connect to a vendor', parse: int(5_000, 10, 120_000) },
  VENDOR_CONCURRENCY_LIMIT: { description: 'vendor calls in flight per org x vendor per process', parse: int(8, 1, 10_000) },
  VENDOR_MAX_RETRIES: { description: 'retries of an idempotent vendor call on a retryable failure', parse: int(3, 0, 10) },
  VENDOR_RETRY_AFTER_CAP_MS: { description: 'longest Retry-After the gateway sleeps on; longer is handed back to the agent', parse: int(2_000, 0, 60_000) },
  VENDOR_MAX_RESPONSE_BYTES: { description: 'hard cap on a vendor response body', parse: int(5 * 1024 * 1024, 1024, 100 * 1024 * 1024) },
  CIRCUIT_BREAKER_THRESHOLD: { description: 'consecutive vendor failures that open the breaker (org x vendor)', parse: int(5, 1, 1000) },
  CIRCUIT_BREAKER_COOLDOWN_MS: { description: 'how long an open breaker stays open before one probe', parse: int(30_000, 10, 3_600_000) },
  RESULT_BUDGET_BYTES: { description: 'per-result budget of model-facing JSON', parse: int(50 * 1024, 256, 10 * 1024 * 1024) },
  BATCH_BUDGET_BYTES: { description: 'batch-wide budget of model-facing content', parse: int(200 * 1024, 1024, 50 * 1024 * 1024) },
  RESULT_TTL_SECONDS: { description: 'how long full results are kept (encrypted) for replay and pick-up', parse: int(86_400, 60, 90 * 86_400) },
  APPROVAL_TTL_SECONDS: { description: 'how long an approval request stays open', parse: int(86_400, 1, 90 * 86_400) },
  STALE_RUNNING_MARGIN_MS: { description: 'a call running longer than VENDOR_TIMEOUT_MS + this is presumed orphaned', parse: int(60_000, 0, 3_600_000) },
  LEDGER_SEAL_INTERVAL_MS: { description: 'how often the hash-chain sealer runs', parse: int(200, 10, 60_000) },
  SHOPIFY_BASE_URL: { description: 'replaces https://{shopDomain} for Shopify calls', parse: url() },
  SHOPIFY_API_VERSION: {
    description: 'default Shopify Admin API version',
    parse: (raw: string | undefined) => {
      const v = req('2026-07')(raw);
      // It is a path segment of every Admin API URL: a quarterly release ("2026-07") or "unstable".
      if (!/^(\d{4}-(01|04|07|10)|unstable)$/.test(v)) throw new Error(`must be a Shopify API version such as 2026-07, got "${raw}"`);
      return v;
    },
  },
  AMAZON_LWA_URL: { description: 'Login with Amazon token endpoint', parse: url('https://api.amazon.com/auth/o2/token') },
  AMAZON_SPAPI_BASE_URL: { description: 'SP-API host; default https://sellingpartnerapi-{region}.amazon.com', parse: url() },
  AMAZON_ORDERS_API: {
    description: 'SP-API Orders version amazon_query calls: v0 (deprecated, removed 27 Mar 2027) or 2026-01-01; the tools answer the same either way',
    parse: oneOf<AmazonOrdersApi>('v0', AMAZON_ORDERS_APIS),
  },
  JUMIO_AUTH_BASE_URL: { description: 'Jumio auth host; default https://auth.{region}.jumio.ai', parse: url() },
  JUMIO_RETRIEVAL_BASE_URL: { description: 'Jumio retrieval host; default https://retrieval.{region}.jumio.ai', parse: url() },
  NANGO_HOST: { description: 'Nango server', parse: url('https://api.nango.dev') },
} satisfies Record<string, VarSpec<unknown>>;

type Schema = typeof CONFIG_SCHEMA;
export type RawConfig = { [K in keyof Schema]: ReturnType<Schema[K]['parse']> };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Parses every variable; problems are collected, not thrown, so one run reports them all. */
export function parseRawConfigCollecting(env: NodeJS.ProcessEnv): { raw: RawConfig; problems: string[] } {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, spec] of Object.entries(CONFIG_SCHEMA) as [string, VarSpec<unknown>][]) {
    try {
      out[name] = spec.parse(env[name], env);
    } catch (err) {
      problems.push(`${name} ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { raw: out as RawConfig, problems };
}

export function parseRawConfig(env: NodeJS.ProcessEnv): RawConfig {
  const { raw, problems } = parseRawConfigCollecting(env);
  if (problems.length) throw new ConfigError(problems);
  return raw;
}

export const SENSITIVE_VARS = Object.entries(CONFIG_SCHEMA)
  .filter(([, spec]) => (spec as VarSpec<unknown>).sensitive)
  .map(([name]) => name);

/**
 * What is wrong with the database variables (DATABASE_URL, DB_CONNECTION_MODE, DB_QUERY_TIMEOUT_MS) as the gateway
 * reads them, for the commands that connect without the whole config; undefined when they are fine. The messages never
 * echo the URL (its password).
 */
export function databaseEnvProblem(env: NodeJS.ProcessEnv): string | undefined {
  for (const name of ['DATABASE_URL', 'DB_CONNECTION_MODE', 'DB_QUERY_TIMEOUT_MS'] as const) {
    try {
      CONFIG_SCHEMA[name].parse(env[name]);
    } catch (err) {
      return `${name} ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  return undefined;
}
