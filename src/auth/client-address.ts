import { isIPv4, isIPv6 } from 'node:net';

/**
 * The key a client's address is metered under: an IPv4 address as it is (also
 * when IPv4-mapped, `::ffff:10.0.0.1`), an IPv6 address by its /64 — one host
 * is usually given a whole /64, so metering single IPv6 addresses would let it
 * pick a fresh one for every request. Anything else shares one key: with
 * TRUST_PROXY_HOPS above the proxies a request really passed, the address is
 * the client's own X-Forwarded-For text, and every made-up value would get its
 * own allowance (and its own bucket, up to 16 KB of key).
 */
export function clientAddressKey(ip: string | undefined): string {
  if (!ip) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped && isIPv4(mapped[1])) return mapped[1];
  if (isIPv4(ip)) return ip;
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
