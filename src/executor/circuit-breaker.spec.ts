import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from './circuit-breaker.js';

function setup() {
  let t = 0;
  const b = new CircuitBreaker(3, 1_000, () => t);
  return { b, advance: (ms: number) => (t += ms) };
}

describe('CircuitBreaker', () => {
  it('opens after the threshold of consecutive failures', () => {
    const { b } = setup();
    for (let i = 0; i < 2; i++) {
      expect(b.tryAcquire()).toBe(true);
      b.onFailure();
    }
    expect(b.current).toBe('closed');
    b.tryAcquire();
    b.onFailure();
    expect(b.current).toBe('open');
    expect(b.tryAcquire()).toBe(false);
  });

  it('a success or a neutral outcome resets the count', () => {
    const { b } = setup();
    b.onFailure();
    b.onFailure();
    b.onSuccess();
    b.onFailure();
    b.onFailure();
    b.onNeutral();
    b.onFailure();
    b.onFailure();
    expect(b.current).toBe('closed');
  });

  it('lets exactly one probe through after the cooldown', () => {
    const { b, advance } = setup();
    for (let i = 0; i < 3; i++) b.onFailure();
    advance(999);
    expect(b.tryAcquire()).toBe(false);
    advance(1);
    expect(b.current).toBe('half_open');
    expect(b.tryAcquire()).toBe(true);
    expect(b.tryAcquire()).toBe(false);
    expect(b.tryAcquire()).toBe(false);
    b.onSuccess();
    expect(b.current).toBe('closed');
    expect(b.tryAcquire()).toBe(true);
  });

  it('a failed probe opens it again for another cooldown', () => {
    const { b, advance } = setup();
    for (let i = 0; i < 3; i++) b.onFailure();
    advance(1_000);
    expect(b.tryAcquire()).toBe(true);
    b.onFailure();
    expect(b.current).toBe('open');
    advance(500);
    expect(b.tryAcquire()).toBe(false);
    advance(500);
    expect(b.tryAcquire()).toBe(true);
  });

  it('a probe abandoned without a verdict frees the slot for the next probe', () => {
    const { b, advance } = setup();
    for (let i = 0; i < 3; i++) b.onFailure();
    advance(1_000);
    expect(b.tryAcquire()).toBe(true);
    expect(b.tryAcquire()).toBe(false);
    b.onAbandoned();
    expect(b.current).toBe('half_open');
    expect(b.tryAcquire()).toBe(true);
    expect(b.tryAcquire()).toBe(false);
    b.onSuccess();
    expect(b.current).toBe('closed');
  });

  it('abandoning a call while closed changes nothing', () => {
    const { b } = setup();
    b.onFailure();
    b.onFailure();
    b.onAbandoned();
    b.onFailure();
    expect(b.current).toBe('open');
  });
});
