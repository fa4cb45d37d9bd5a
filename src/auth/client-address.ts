import { isIPv4, isIPv6 } from 'node:net';
import { ownString } from '../common/own-string.js';

/**
 * The key a client's address is metered under: an IPv4 address as it is (also
 * when IPv4-mapped, `::ffff:10.0.0.1`), an IPv6 address by its /64 — one host
 * is usually given a whole /64, so metering single IPv6 addresses would let it
 * pick a fresh one for every request. Anything else shares one key: with
 * TRUST_PROXY_HOPS above the proxies a request really passed, the address is
 * the client's own X-Forwarded-For text, and every made-up value would get its
 * own allowance (and its own bucket, up to 16 KB of key). Some proxies write
 * the client's port too (`203.0.113.7:51234`, `[2001:db8::1]:443`): the
 * address is read without it.
 */
export function clientAddressKey(raw: string | undefined): string {
  if (!raw) return 'unknown';
  const ip = withoutPort(raw);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  // A string of its own (ownString): req.ip is cut out of the X-Forwarded-For header, and V8 keeps a cut of 13
  // characters or more ("100.123.145.167") as a view into the whole header, so each rate limiter bucket key held its
  // first request's header alive, up to HTTP_MAX_HEADER_BYTES (1.3 GB at the limiter's 100,000 buckets of 16 KiB).
  if (mapped && isIPv4(mapped[1])) return ownString(mapped[1]);
  if (isIPv4(ip)) return ownString(ip);
  if (!isIPv6(ip)) return 'invalid';
  const addr = ip.split('%')[0]; // a zone id names the interface, not the host
  const [head, tail] = addr.includes('::') ? addr.split('::') : [addr, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  // An embedded IPv4 tail ("::1.2.3.4") fills two groups.
  const tailGroups = t.length + (t.some((g) => g.includes('.')) ? 1 : 0);
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - tailGroups).fill('0'), ...t];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/**
 * The metering key of a request's client: req.ip (what the last TRUST_PROXY_HOPS proxies report, app.setup.ts), else
 * its peer. The rate limiters meter by it and the request log names the client by it, so the two always agree.
 */
export function clientAddressOf(req: { ip?: string; socket: { remoteAddress?: string } }): string {
  return clientAddressKey(req.ip ?? req.socket.remoteAddress);
}

/**
 * The address Express gives req.ip with `trust proxy` set to `hops` (app.setup.ts), for a request answered before
 * Express saw it (bootstrap.ts: an Expect refused): the peer, then X-Forwarded-For read from its end, `hops` back
 * at most (proxy-addr's rule for a hop count).
 */
export function forwardedAddress(req: { headers: Record<string, string | string[] | undefined>; socket: { remoteAddress?: string } }, hops: number): string | undefined {
  if (hops <= 0) return req.socket.remoteAddress;
  const header = req.headers['x-forwarded-for'];
  // Split on commas only, each entry trimmed (the forwarded package's reading): "a b" is one entry, not an address.
  const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').map((e) => e.trim()).filter(Boolean).reverse();
  const chain = [req.socket.remoteAddress, ...forwarded];
  return chain[Math.min(hops, chain.length - 1)];
}

/** "a.b.c.d:port" → "a.b.c.d", "[v6]:port" or "[v6]" → "v6"; anything else as it is. */
function withoutPort(ip: string): string {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(ip);
  if (v4) return v4[1];
  const v6 = /^\[([0-9a-fA-F:.%\w]+)\](?::\d{1,5})?$/.exec(ip);
  return v6 ? v6[1] : ip;
}
