import { describe, expect, it } from 'vitest';
import { clientAddressKey, forwardedAddress } from './client-address.js';
import { RateLimiter } from './rate-limiter.js';

describe('clientAddressKey', () => {
  it('keeps IPv4 as it is, also IPv4-mapped', () => {
    expect(clientAddressKey('10.1.2.3')).toBe('10.1.2.3');
    expect(clientAddressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(clientAddressKey('::FFFF:127.0.0.1')).toBe('127.0.0.1');
  });

  it('meters IPv6 by its /64, whatever the spelling', () => {
    const k = '2001:db8:0:1::/64';
    for (const ip of ['2001:db8:0:1::1', '2001:0db8:0000:0001:ffff:1:2:3', '2001:db8::1:0:0:0:9', '2001:db8:0:1::5%eth0', '2001:db8:0:1::1.2.3.4']) {
      expect(clientAddressKey(ip), ip).toBe(k);
    }
    expect(clientAddressKey('2001:db8:0:2::1')).not.toBe(k);
    expect(clientAddressKey('::1')).toBe('0:0:0:0::/64');
    expect(clientAddressKey('1::')).toBe('1:0:0:0::/64');
  });

  it('reads an address a proxy wrote with its port (Azure App Service) without it: one client, one key', () => {
    expect(clientAddressKey('203.0.113.7:51234')).toBe('203.0.113.7');
    expect(clientAddressKey('203.0.113.8:443')).toBe('203.0.113.8');
    expect(clientAddressKey('[2001:db8:0:1::1]:443')).toBe('2001:db8:0:1::/64');
    expect(clientAddressKey('[2001:db8:0:1::1]')).toBe('2001:db8:0:1::/64');
    expect(clientAddressKey('203.0.113.7:port')).toBe('invalid');
  });

  it('anything else shares one key: a made-up X-Forwarded-For value gets no allowance of its own', () => {
    expect(clientAddressKey(undefined)).toBe('unknown');
    expect(clientAddressKey('')).toBe('unknown');
    for (const made of ['not-an-ip', 'x'.repeat(16_000), '10.0.0.1, 10.0.0.2', '999.1.1.1', '2001:db8::g']) expect(clientAddressKey(made), made.slice(0, 20)).toBe('invalid');
  });
});

describe('forwardedAddress: req.ip as Express gives it for a hop count', () => {
  const req = (xff: string | string[] | undefined, peer = '10.0.0.1') => ({ headers: { 'x-forwarded-for': xff }, socket: { remoteAddress: peer } });
  it('reads X-Forwarded-For from its end, hops back at most; the peer with no hops', () => {
    expect(forwardedAddress(req('203.0.113.7'), 0)).toBe('10.0.0.1');
    expect(forwardedAddress(req('203.0.113.7'), 1)).toBe('203.0.113.7');
    expect(forwardedAddress(req('198.51.100.1, 203.0.113.7'), 1)).toBe('203.0.113.7');
    expect(forwardedAddress(req('198.51.100.1, 203.0.113.7'), 2)).toBe('198.51.100.1');
    expect(forwardedAddress(req('198.51.100.1,203.0.113.7'), 5)).toBe('198.51.100.1'); // fewer hops than trusted: the first
    expect(forwardedAddress(req(['198.51.100.1', '203.0.113.7']), 2)).toBe('198.51.100.1'); // two header fields, one list
    expect(forwardedAddress(req(undefined), 1)).toBe('10.0.0.1'); // no header: the peer
    // Commas only separate entries (the forwarded package's reading): "a b" is one entry, and no address.
    expect(clientAddressKey(forwardedAddress(req('203.0.113.7 198.51.100.9'), 1))).toBe('invalid');
    expect(forwardedAddress(req(' 198.51.100.1 ,203.0.113.7 '), 2)).toBe('198.51.100.1');
  });
});

describe('RateLimiter', () => {
  it('take spends a token or says how long to wait (spending nothing); refund gives one back, up to the burst', () => {
    let now = 0;
    const l = new RateLimiter(2, () => now); // burst 4
    for (let i = 0; i < 4; i++) expect(l.take('a')).toBe(0);
    expect(l.take('a')).toBe(1);
    expect(l.take('a')).toBe(1);
    l.refund('a');
    expect(l.take('a')).toBe(0);
    expect(l.take('a')).toBe(1);
    now = 500; // one token back
    expect(l.take('a')).toBe(0);
    expect(l.take('a')).toBe(1);
    for (let i = 0; i < 10; i++) l.refund('a');
    for (let i = 0; i < 4; i++) expect(l.take('a')).toBe(0); // never more than the burst
    expect(l.take('a')).toBe(1);
    l.refund('never-seen'); // no bucket: nothing to give back
    expect(l.take('never-seen')).toBe(0);
  });

  it('a request may cost several tokens: all or nothing, the wait counts them all, and a cost above the burst passes a full bucket and leaves it in debt', () => {
    let now = 0;
    const l = new RateLimiter(2, () => now); // burst 4
    expect(l.take('a', 3)).toBe(0);
    expect(l.take('a', 2)).toBe(1); // one token left: nothing spent
    expect(l.take('a')).toBe(0); // the one token
    expect(l.take('a', 4)).toBe(2); // 4 tokens at 2 a second
    now = 1000; // two back
    expect(l.take('a', 4)).toBe(1);
    expect(l.take('a', 2)).toBe(0);
    now = 3000; // full again (4)
    expect(l.take('a', 5)).toBe(0); // a full bucket lets it through: 1 token owed
    expect(l.take('a')).toBe(1); // (1 + 1) / 2 a second
    now = 4000; // the debt paid, one token
    expect(l.take('a', 0)).toBe(0); // at least one
    expect(l.take('a')).toBe(1);
    now = 6000; // full again
    expect(l.take('a', 32)).toBe(0); // 28 owed
    expect(l.take('a')).toBe(15); // (1 + 28) / 2 a second: 32 calls cost 16 s at 2 a second, however they are sent
    now = 20_000;
    expect(l.take('a')).toBe(1);
    now = 20_500;
    expect(l.take('a')).toBe(0);
  });

  it('0 disables it', () => {
    const l = new RateLimiter(0);
    for (let i = 0; i < 100; i++) expect(l.take('a')).toBe(0);
  });

  it('keeps at most 100,000 buckets, dropping the oldest', () => {
    const l = new RateLimiter(1, () => 0);
    for (let i = 0; i < 2; i++) l.take('first');
    expect(l.take('first')).toBe(1);
    for (let i = 0; i < 100_000; i++) l.take(`k${i}`);
    expect(l.take('first')).toBe(0); // dropped, so full again
    expect(l.take('k99999')).toBe(0);
    expect(l.take('k99999')).toBe(1); // still kept: its second token was its last
  });
});

describe('clientAddressKey keeps no header alive', () => {
  it('an IPv4 key cut out of a long X-Forwarded-For header does not hold the header (V8 keeps long cuts as views)', async () => {
    const v8 = await import('node:v8');
    const vm = await import('node:vm');
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const heap = () => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const keys: string[] = [];
    const before = heap();
    for (let i = 0; i < 2_000; i++) {
      // As proxy-addr hands req.ip: the last address of the header, cut out of it.
      const header = `${'x'.repeat(15_000)}${i}, 100.123.${Math.floor(i / 250)}.${100 + (i % 150)}`;
      const ip = header.slice(header.lastIndexOf(',') + 2);
      keys.push(clientAddressKey(ip), clientAddressKey(`::ffff:${ip}`));
    }
    const retained = heap() - before;
    expect(keys[0]).toBe('100.123.0.100');
    expect(keys[1]).toBe('100.123.0.100');
    // 2,000 headers of 15 KB are 30 MB; the keys themselves well under 1 MB.
    expect(retained).toBeLessThan(5 * 1024 * 1024);
  });
});
