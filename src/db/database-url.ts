/**
 * DATABASE_URL read as the driver reads it. The Unix-socket form names no host between the user and the path
 * (postgres://user@/db?host=/var/run/postgresql): pg-connection-string takes it, WHATWG URL refuses it. It is read
 * here with a stand-in host, put back out of every URL written from it.
 */
const USER_THEN_NO_HOST = /^(postgres(?:ql)?:\/\/[^/@?#]*@)(?=\/)/;
const STAND_IN = 'localhost';

/** The URL as WHATWG reads it, a socket form's missing host standing in as localhost; throws as `new URL` does. */
export function readDatabaseUrl(url: string): URL {
  return new URL(url.replace(USER_THEN_NO_HOST, `$1${STAND_IN}`));
}

/**
 * The user's own startup options, as the driver sends them: the URL's `options` parameter (given twice, the last),
 * else PGOPTIONS; null when neither. The driver lets the URL's parameter override its config's.
 */
export function userStartupOptions(url: string, env: NodeJS.ProcessEnv = process.env): { from: 'url' | 'PGOPTIONS'; value: string } | null {
  let fromUrl: string | undefined;
  try {
    fromUrl = readDatabaseUrl(url).searchParams.getAll('options').at(-1);
  } catch {
    fromUrl = undefined; // not a URL WHATWG reads: left to the driver, which says what is wrong with it
  }
  if (fromUrl !== undefined) return { from: 'url', value: fromUrl };
  const pgOptions = env.PGOPTIONS?.trim();
  return pgOptions ? { from: 'PGOPTIONS', value: pgOptions } : null;
}

/** The same server and options, another database. */
export function withDatabaseName(url: string, database: string): string {
  return rewritten(url, (u) => {
    u.pathname = `/${database}`;
  });
}

/** The same URL with its query parameter `name` set to `value` (pg-connection-string reads it back decoded). */
export function withSearchParam(url: string, name: string, value: string): string {
  return rewritten(url, (u) => u.searchParams.set(name, value));
}

function rewritten(url: string, edit: (u: URL) => void): string {
  const socket = USER_THEN_NO_HOST.test(url);
  const u = readDatabaseUrl(url);
  edit(u);
  const out = u.toString();
  return socket ? out.replace(/^(postgres(?:ql)?:\/\/[^/@?#]*@)localhost(?=\/)/, '$1') : out;
}
