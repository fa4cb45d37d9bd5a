import { describe, expect, it } from 'vitest';
import { buildNangoProxyUrl, canonicalNangoPath, checkNangoParams, checkNangoPath, checkNangoQuery, isReservedKey, NANGO_CANONICAL_PATH_MAX, NANGO_PATH_MAX, NANGO_TARGET_MAX, QUERY_VALUE_MAX } from './nango-path.js';
import { HOSTILE_NANGO_PATHS, NON_CANONICAL_NANGO_PATHS, SAFE_NANGO_PATHS } from './nango-path.cases.js';

describe('checkNangoPath', () => {
  it('has a table of at least 25 hostile paths', () => {
    expect(HOSTILE_NANGO_PATHS.length).toBeGreaterThanOrEqual(25);
  });

  it.each(HOSTILE_NANGO_PATHS)('rejects %s', (_label, path) => {
    const message = checkNangoPath(path);
    expect(message).toMatch(/^path: /);
  });

  it.each(SAFE_NANGO_PATHS)('accepts %s', (path) => {
    expect(checkNangoPath(path)).toBeNull();
  });

  it('rejects a path that is not a string', () => {
    expect(checkNangoPath(42)).toBe('path: must be a string');
    expect(checkNangoPath(undefined)).toBe('path: must be a string');
  });

  it('accepts exactly 2048 characters', () => {
    expect(checkNangoPath(`v/${'a'.repeat(2046)}`)).toBeNull();
  });

  it('counts NANGO_PATH_MAX after the optional leading "/": both spellings of one path get the same limit', () => {
    const longest = `v1/${'a'.repeat(NANGO_PATH_MAX - 3)}`;
    expect(longest).toHaveLength(NANGO_PATH_MAX);
    expect(checkNangoPath(longest)).toBeNull();
    expect(checkNangoPath(`/${longest}`)).toBeNull();
    // What the catalog's JSON Schema is checked against: the same path, with its "/" added.
    expect(canonicalNangoPath(longest)).toHaveLength(NANGO_CANONICAL_PATH_MAX);
    expect(checkNangoPath(canonicalNangoPath(longest))).toBeNull();
    const message = "path: longer than 2048 characters (not counting a leading '/')";
    expect(checkNangoPath(`${longest}a`)).toBe(message);
    expect(checkNangoPath(`/${longest}a`)).toBe(message);
  });
});

describe('one spelling of a path', () => {
  it.each(NON_CANONICAL_NANGO_PATHS)('refuses %s (%s), and accepts %s', (_label, path, canonical) => {
    expect(checkNangoPath(path)).toMatch(/^path: /);
    expect(checkNangoPath(canonical)).toBeNull();
  });

  it('says which spelling to use', () => {
    expect(checkNangoPath('/v1/admin/users/')).toBeNull(); // sent as given; policy rules ignore a trailing "/" (pathParams)
    expect(checkNangoPath('/v1/admin/users;x=1')).toBe("path: ';' (path parameters) is not allowed");
    expect(checkNangoPath('/v1/admin/users%3B')).toBe("path: ';' (path parameters) is not allowed");
    expect(checkNangoPath('/v1/admin%2Fusers')).toBe("path: an encoded '/' (%2F) is not allowed");
    expect(checkNangoPath('/v1/abc%3abatchUpdate')).toBe("path: write !$&'()*+,=: as themselves, not percent-encoded");
  });

  it('keeps percent-encoding of what has no literal form in a segment', () => {
    for (const path of ['/v1/a%20b', '/v1/a%22b', '/v1/a%3Cb%3E', '/v1/a%5Bb%5D', '/v1/a%7Cb', '/v1/users/auth0%7C123', '/v1/a%5Eb', '/v1/a%60b', '/v1/caf%c3%a9']) {
      expect(checkNangoPath(path), path).toBeNull();
    }
  });

  it('canonicalNangoPath: one leading "/" and upper-case hex', () => {
    expect(canonicalNangoPath('v1/search/caf%c3%a9')).toBe('/v1/search/caf%C3%A9');
    expect(canonicalNangoPath('/v1/search/caf%C3%A9')).toBe('/v1/search/caf%C3%A9');
    expect(canonicalNangoPath('/v1/a%2a')).toBe('/v1/a%2A'); // only ever called on a checked path
    expect(canonicalNangoPath('/v1/Admin/Users')).toBe('/v1/Admin/Users'); // letters outside %XX keep their case
  });
});

describe('what a Nango decoding the path would read as a query, fragment or template', () => {
  it.each([
    ['?', ['v1/x?a=1', 'v1/x%3Fa=1', 'v1/x%3fa=1', 'v1/x%EF%BC%9Fa=1'], 'path: put query parameters in `query`, not in the path (neither ? nor %3F)'],
    ['#', ['v1/x#f', 'v1/x%23f', 'v1/x%EF%B9%9F'], 'path: fragments (# or %23) are not allowed'],
    ['{ }', ['v1/${access_token}', 'v1/$%7Baccess_token%7D', 'v1/$%7baccess_token%7d', 'v1/a%7D', 'v1/$%EF%BD%9Baccess_token%EF%BD%9D'], "path: '{' and '}' (or %7B, %7D) are not allowed: Nango reads ${...} in a path as a template"],
    ['||', ['v1/admin/users%7C%7Cx', 'v1/a%7c%7cb', 'v1/a%EF%BD%9C%EF%BD%9Cb'], "path: '||' (or %7C%7C) is not allowed: Nango cuts a templated URL there"],
  ] as const)('refuses %s raw, percent-encoded in either hex case and as its NFKC look-alike, with one message', (_char, paths, message) => {
    for (const path of paths) expect(checkNangoPath(path), path).toBe(message);
  });

  it('refuses a path NFKC would read as another (fullwidth "/" or letters, decomposed accents): one spelling per path', () => {
    const message = 'path: write characters as their plain form (the one Unicode NFKC normalisation gives), not as fullwidth, compatibility or decomposed look-alikes';
    // U+FF0F FULLWIDTH SOLIDUS, U+FF41 FULLWIDTH A, "e" + U+0301 COMBINING ACUTE, U+FB01 LATIN SMALL LIGATURE FI
    for (const path of ['/v1/admin%EF%BC%8Fusers', '/v1/%EF%BD%81dmin/users', '/v1/search/cafe%CC%81', '/v1/%EF%AC%81les']) {
      expect(checkNangoPath(path), path).toBe(message);
    }
    // The composed spelling NFKC keeps, and non-Latin letters, pass as before.
    for (const path of ['/v1/search/caf%C3%A9', '/v1/search/%E6%9D%B1%E4%BA%AC', '/v1/users/j%C3%BCrgen']) expect(checkNangoPath(path), path).toBeNull();
  });

  it('keeps a single "|" (Auth0 user ids are auth0|123) and a "$" not followed by a brace', () => {
    for (const path of ['/v1/users/auth0%7C123', '/v1/a%7Cb%7Cc', '/v1/prices/$100']) expect(checkNangoPath(path), path).toBeNull();
  });
});

describe('checkNangoQuery and reserved keys', () => {
  it.each(['Base-Url-Override', 'baseUrlOverride', 'base_url_override', 'BASE-URL-OVERRIDE', 'Connection-Id', 'connection_id', 'Provider-Config-Key', 'providerConfigKey', 'Retries', 'Retry-On', 'retry_on', 'Nango-Proxy-Authorization', 'nango_anything', 'Authorization'])(
    'treats %s as reserved',
    (key) => {
      expect(isReservedKey(key)).toBe(true);
      expect(checkNangoQuery({ [key]: 'x' })).toMatch(/^query\..*: may not set Nango control headers/);
    },
  );

  it('accepts ordinary query values', () => {
    expect(checkNangoQuery({ limit: 10, status: 'open', archived: false, 'filter[name]': 'a b&c' })).toBeNull();
    expect(checkNangoQuery(undefined)).toBeNull();
  });

  it('rejects bad query shapes', () => {
    expect(checkNangoQuery('a=1')).toBe('query: must be an object');
    expect(checkNangoQuery({ a: { nested: true } })).toMatch(/^query\.a: /);
    expect(checkNangoQuery({ a: Number.NaN })).toMatch(/^query\.a: /);
    expect(checkNangoQuery({ 'a\r\nb': 'x' })).toMatch(/^query: /);
    expect(checkNangoQuery({ a: 'x'.repeat(2049) })).toMatch(/^query\.a: /);
  });

  it('refuses lone UTF-16 surrogates in names and values (URLSearchParams sent U+FFFD: another text than the one judged)', () => {
    expect(checkNangoQuery({ q: 'a\ud800b' })).toMatch(/^query\.q: must be well-formed text/);
    expect(checkNangoQuery({ q: 'b\udc00' })).toMatch(/^query\.q: must be well-formed text/);
    expect(checkNangoQuery({ '\ud800': 'x' })).toMatch(/^query: parameter names/);
    // A pair is a character like any other.
    expect(checkNangoQuery({ '😀': 'caf\u00e9 😀' })).toBeNull();
  });
});

describe('checkNangoParams', () => {
  it('rejects params that try to set Nango headers or a base URL override', () => {
    expect(checkNangoParams('get', { path: '/v1/x', baseUrlOverride: 'http://evil.example' })).toMatch(/^baseUrlOverride: /);
    expect(checkNangoParams('get', { path: '/v1/x', 'Base-Url-Override': 'http://evil.example' })).toMatch(/^Base-Url-Override: /);
    expect(checkNangoParams('post', { path: '/v1/x', body: {}, Retries: 5 })).toMatch(/^Retries: /);
    expect(checkNangoParams('get', { path: '/v1/x', headers: {} })).toBe('headers: unknown parameter');
  });

  it('checks each action', () => {
    expect(checkNangoParams('get', { path: '/v1/x', query: { a: 1 } })).toBeNull();
    expect(checkNangoParams('post', { path: '/v1/x', body: { a: 1 } })).toBeNull();
    expect(checkNangoParams('post', { path: '/v1/x', body: [1] })).toBe('body: must be an object');
    expect(checkNangoParams('post', { path: '/v1/x', body: {}, query: {} })).toBe('query: unknown parameter');
    expect(checkNangoParams('delete', { path: '/v1/x' })).toMatch(/^action: /);
  });
});

describe('buildNangoProxyUrl', () => {
  it('writes a number in the query as the plain decimal a rule compared, never in exponent form (String() gave "1e-7", "1e+21": an integer parser reads 1, or refuses)', () => {
    const url = new URL(buildNangoProxyUrl('https://api.nango.dev', '/v1/items', { small: 0.0000001, big: 1e21, neg: -1.5e-7, plain: 12.5, zero: -0 })!);
    expect(Object.fromEntries(url.searchParams)).toEqual({ small: '0.0000001', big: '1000000000000000000000', neg: '-0.00000015', plain: '12.5', zero: '0' });
  });

  it('keeps the Nango host and appends the encoded query', () => {
    const url = buildNangoProxyUrl('https://api.nango.dev', '/v1/customers/42', { limit: 10, q: 'a b&c' });
    expect(url).toBe('https://api.nango.dev/proxy/v1/customers/42?limit=10&q=a+b%26c');
    expect(new URL(url!).host).toBe('api.nango.dev');
  });

  it('keeps a self-hosted path prefix', () => {
    expect(buildNangoProxyUrl('https://nango.internal:8443/base/', 'v1/x')).toBe('https://nango.internal:8443/base/proxy/v1/x');
  });

  it.each(SAFE_NANGO_PATHS)('stays on the Nango host for %s', (path) => {
    expect(new URL(buildNangoProxyUrl('http://127.0.0.1:4000', path)!).host).toBe('127.0.0.1:4000');
  });

  it('refuses anything the URL parser would move elsewhere, even if it skipped validation', () => {
    expect(buildNangoProxyUrl('https://api.nango.dev', '../../admin')).toBeNull();
    expect(buildNangoProxyUrl('https://api.nango.dev', 'a/%2e%2e/%2e%2e/x')).toBeNull();
    expect(buildNangoProxyUrl('https://api.nango.dev', 'a\\evil.example')).toBeNull(); // WHATWG turns \ into /
    expect(buildNangoProxyUrl('https://api.nango.dev', 'a b')).toBeNull();
    expect(buildNangoProxyUrl('not a url', 'v1/x')).toBeNull();
  });
});

describe('checkNangoParams: the request target as sent', () => {
  it('refuses a query within the per-value limits whose percent-encoded URL passes NANGO_TARGET_MAX, saying how long it would be', () => {
    const query: Record<string, string> = {};
    for (let i = 0; i < 3; i++) query[`k${i}`] = 'é'.repeat(QUERY_VALUE_MAX); // 2,048 characters each, 12,288 sent
    expect(checkNangoQuery(query)).toBeNull();
    const message = checkNangoParams('get', { path: '/v1/search', query });
    expect(message).toMatch(/^query: the request URL would be \d+ characters once percent-encoded \(path and query\), over the 8192/);
    expect(Number(/would be (\d+)/.exec(message!)![1])).toBeGreaterThan(3 * 6 * QUERY_VALUE_MAX);
  });

  it('takes a target of exactly NANGO_TARGET_MAX, and a long ASCII query under it', () => {
    const full = 'x'.repeat(QUERY_VALUE_MAX);
    const last = NANGO_TARGET_MAX - '/proxy/v1/x?a=&b=&c=&d='.length - 3 * QUERY_VALUE_MAX;
    const query = (d: number) => ({ a: full, b: full, c: full, d: 'x'.repeat(d) });
    expect(checkNangoParams('get', { path: '/v1/x', query: query(last) })).toBeNull();
    expect(checkNangoParams('get', { path: '/v1/x', query: query(last + 1) })).toMatch(/^query: the request URL would be 8193 characters/);
    expect(checkNangoParams('get', { path: '/v1/search', query: { a: 'x'.repeat(QUERY_VALUE_MAX), b: 'y'.repeat(QUERY_VALUE_MAX) } })).toBeNull();
  });
});
