import { describe, expect, it } from 'vitest';
import { validHostValue } from './host-required.js';

describe('validHostValue (RFC 9112 §3.2: uri-host [":" port])', () => {
  it('a reg-name, an IPv4 address or a bracketed IPv6 / IPvFuture literal, with or without a port of digits', () => {
    for (const host of [
      'localhost', 'api.example.com', 'api.example.com:8443', 'x:', '127.0.0.1', '127.0.0.1:3000', '[::1]', '[::1]:3000',
      '[2001:db8::1]', '[v1.fe80::a+en1]', 'xn--bcher-kva.example', 'a%2Db', "a!$&'()*+,;=b", '~_-.', '',
    ]) {
      expect(validHostValue(host), host).toBe(true);
    }
  });

  it('anything else: two joined fields, a path, a space, a port that is not digits, an unbracketed or broken IPv6 literal', () => {
    for (const host of [
      'a, b', 'x/y', 'a b', 'x:notaport', 'x:80:80', 'x:-1', '::1', '[::1', '[::1]x', '[::1]:a', '[not-ipv6]', 'a%2', 'a%zz',
      'x@y', 'x?y', 'x#y', 'x\\y', 'é.example', 'a\tb', '[]',
    ]) {
      expect(validHostValue(host), host).toBe(false);
    }
  });
});
