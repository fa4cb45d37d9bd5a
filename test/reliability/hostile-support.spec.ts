import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectPrototypeClean, runs } from './hostile.support.js';

/** The checks the hostile specs run after every input (hostile.support.ts) see what they claim to. */
describe('expectPrototypeClean', () => {
  /** What expectPrototypeClean says after `pollute`, and whether it left the prototypes clean again. */
  const afterPollution = (pollute: () => void): { failure: string; cleanAfter: boolean } => {
    pollute();
    let failure = '';
    try {
      expectPrototypeClean();
    } catch (e) {
      failure = (e as Error).message;
    }
    let cleanAfter = true;
    try {
      expectPrototypeClean();
    } catch {
      cleanAfter = false;
    }
    return { failure, cleanAfter };
  };
  const proto = Object.prototype as unknown as Record<PropertyKey, unknown>;

  it('passes on the prototypes as the runtime made them', () => {
    expect(() => expectPrototypeClean()).not.toThrow();
  });

  it('fails on a built-in of Object.prototype replaced (same keys, another function), and puts it back', () => {
    const original = Object.prototype.valueOf;
    const { failure, cleanAfter } = afterPollution(() => {
      Reflect.set(Object.prototype, 'valueOf', function polluted(this: unknown) {
        return this;
      });
    });
    expect(failure).toContain('Object.prototype[valueOf] replaced');
    expect({ cleanAfter, restored: Object.prototype.valueOf === original }).toEqual({ cleanAfter: true, restored: true });
  });

  it('fails on an accessor installed over a built-in, a method of Array.prototype replaced, or a key added to Function.prototype', () => {
    const { failure, cleanAfter } = afterPollution(() => {
      Object.defineProperty(Object.prototype, 'toString', { get: () => () => 'polluted', configurable: true });
      (Array.prototype as unknown as Record<string, unknown>).includes = () => true;
      (Function.prototype as unknown as Record<string, unknown>).polluted = 1;
    });
    expect(failure).toContain('Object.prototype[toString] replaced');
    expect(failure).toContain('Array.prototype[includes] replaced');
    expect(failure).toContain('Function.prototype[polluted] added');
    expect(cleanAfter).toBe(true);
    expect([1].includes(2)).toBe(false);
  });

  it('fails on a symbol key added and on a built-in removed', () => {
    const original = Object.getOwnPropertyDescriptor(Array.prototype, 'at')!;
    const { failure, cleanAfter } = afterPollution(() => {
      proto[Symbol.toPrimitive] = () => 'polluted';
      delete (Array.prototype as unknown as Record<string, unknown>).at;
    });
    expect(failure).toContain('Object.prototype[Symbol(Symbol.toPrimitive)] added');
    expect(failure).toContain('Array.prototype[at] removed');
    expect({ cleanAfter, restored: Array.prototype.at === original.value }).toEqual({ cleanAfter: true, restored: true });
  });
});

describe('runs(): the hostile specs\' fast-check options', () => {
  it('shrink a failure to the smallest counterexample, not the first one found', () => {
    const details = fc.check(
      fc.property(fc.string({ unit: 'binary-ascii', minLength: 20, maxLength: 60 }), (s) => !s.includes('\u0000')),
      { ...runs(200), seed: 42 },
    );
    expect(details.failed).toBe(true);
    expect({ counterexample: details.counterexample, shrunk: details.numShrinks > 0 }).toEqual({
      counterexample: [expect.stringMatching(/^[\s\S]{20}$/)],
      shrunk: true,
    });
    expect(details.counterexample![0]).toContain('\u0000');
  });
});
