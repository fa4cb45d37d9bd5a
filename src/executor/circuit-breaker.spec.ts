import { describe, expect, it } from 'vitest';
import { CircuitBreaker, type BreakerPass } from './circuit-breaker.js';

function setup(threshold = 3) {
  let t = 0;
  const b = new CircuitBreaker(threshold, 1_000, () => t);
  /** A call let through now (it must be). */
  const pass = (): BreakerPass => {
    const p = b.tryAcquire();
    expect(p).not.toBeNull();
    return p!;
  };
  const fail = (n: number) => {
    for (let i = 0; i < n; i++) b.onFailure(pass());
  };
  return { b, pass, fail, advance: (ms: number) => (t += ms) };
}

describe('CircuitBreaker', () => {
  it('says when a report opened or closed it (what the executor logs), and only then', () => {
    const { b, pass, advance } = setup(2);
    expect(b.onFailure(pass())).toBe(false);
    expect(b.onFailure(pass())).toBe(true); // the threshold
    advance(1_000);
    const probe = pass();
    expect(b.onFailure(probe)).toBe(true); // the failed probe opens it again
    advance(1_000);
    expect(b.onNeutral(pass())).toBe(true); // a neutral probe closes it
    expect(b.onSuccess(pass())).toBe(false); // closed already
    expect(b.onNeutral(pass())).toBe(false);
    const early = pass();
    b.onFailure(pass());
    b.onFailure(pass()); // open: `early` is from the phase before
    expect(b.onFailure(early)).toBe(false);
    advance(1_000);
    expect(b.onSuccess(pass())).toBe(true);
  });

  it('opens after the threshold of consecutive failures', () => {
    const { b, fail } = setup();
    fail(2);
    expect(b.current).toBe('closed');
    fail(1);
    expect(b.current).toBe('open');
    expect(b.tryAcquire()).toBeNull();
  });

  it('a success or a neutral outcome resets the count', () => {
    const { b, pass, fail } = setup();
    fail(2);
    b.onSuccess(pass());
    fail(2);
    b.onNeutral(pass());
    fail(2);
    expect(b.current).toBe('closed');
  });

  it('lets exactly one probe through after the cooldown', () => {
    const { b, fail, advance } = setup();
    fail(3);
    advance(999);
    expect(b.tryAcquire()).toBeNull();
    advance(1);
    expect(b.current).toBe('half_open');
    const probe = b.tryAcquire();
    expect(probe).not.toBeNull();
    expect(b.tryAcquire()).toBeNull();
    expect(b.tryAcquire()).toBeNull();
    b.onSuccess(probe!);
    expect(b.current).toBe('closed');
    expect(b.tryAcquire()).not.toBeNull();
  });

  it('a failed probe opens it again for another cooldown', () => {
    const { b, pass, fail, advance } = setup();
    fail(3);
    advance(1_000);
    b.onFailure(pass());
    expect(b.current).toBe('open');
    advance(500);
    expect(b.tryAcquire()).toBeNull();
    advance(500);
    expect(b.tryAcquire()).not.toBeNull();
  });

  it('a probe abandoned without a verdict frees the slot for the next probe', () => {
    const { b, pass, fail, advance } = setup();
    fail(3);
    advance(1_000);
    const probe = pass();
    expect(b.tryAcquire()).toBeNull();
    b.onAbandoned(probe);
    expect(b.current).toBe('half_open');
    const next = pass();
    expect(b.tryAcquire()).toBeNull();
    b.onSuccess(next);
    expect(b.current).toBe('closed');
  });

  it('abandoning a call while closed changes nothing', () => {
    const { b, pass, fail } = setup();
    fail(2);
    b.onAbandoned(pass());
    fail(1);
    expect(b.current).toBe('open');
  });

  it('a call let through before the breaker opened cannot free the half-open probe slot when it reports late', () => {
    const { b, pass, fail, advance } = setup();
    const early = pass(); // still in flight (waiting for a token store or a refund lease, say)
    fail(3);
    advance(1_000);
    const probe = pass();
    b.onAbandoned(early);
    expect(b.tryAcquire()).toBeNull(); // the probe is still out: no second one
    b.onSuccess(early);
    expect(b.current).toBe('half_open'); // nor does its late success close the breaker
    b.onSuccess(probe);
    expect(b.current).toBe('closed');
  });

  it('late failures of calls let through before it opened do not push the cooldown back, nor count after it closes', () => {
    const { b, pass, fail, advance } = setup(2);
    const early = [pass(), pass(), pass()];
    fail(2);
    expect(b.current).toBe('open');
    advance(900);
    b.onFailure(early[0]);
    b.onFailure(early[1]);
    advance(100);
    expect(b.current).toBe('half_open'); // 1 s after it opened, not after the late failures
    b.onSuccess(pass());
    expect(b.current).toBe('closed');
    b.onFailure(early[2]);
    fail(1);
    expect(b.current).toBe('closed'); // one fresh failure of two: the stale one did not count
  });
});

describe('CircuitBreaker: a rate-limited call is neither success nor failure', () => {
  it('passes name the half-open probe, and only it', () => {
    const { pass, fail, advance } = setup();
    expect(pass().probe).toBe(false);
    fail(3);
    advance(1_000);
    expect(pass().probe).toBe(true);
  });

  it('leaves the consecutive-failure count as it is: 5xx and 429 alternating still open the breaker', () => {
    const { b, pass, fail } = setup();
    fail(1);
    b.onRateLimited(pass());
    fail(1);
    b.onRateLimited(pass());
    expect(b.current).toBe('closed');
    fail(1);
    expect(b.current).toBe('open');
  });

  it('a half-open probe answered 429 frees the slot without closing the breaker', () => {
    const { b, pass, fail, advance } = setup();
    fail(3);
    advance(1_000);
    const probe = pass();
    expect(b.tryAcquire()).toBeNull();
    b.onRateLimited(probe);
    expect(b.current).toBe('half_open');
    const next = pass();
    expect(next.probe).toBe(true);
    expect(b.tryAcquire()).toBeNull();
    b.onFailure(next);
    expect(b.current).toBe('open');
  });
});
