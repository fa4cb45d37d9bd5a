import type { Response } from 'supertest';
import { expect } from 'vitest';

/**
 * What every answer to hostile input must be: not a 5xx, and when it is an
 * error without a ledger row, problem+json with a code (API.md §9), never a
 * stack trace.
 */
export function expectSane(res: Response, what = ''): void {
  const label = `${what.slice(0, 200)} → ${res.status} ${res.text?.slice(0, 300)}`;
  expect(res.status, label).toBeLessThan(500);
  expect(res.text ?? '', label).not.toMatch(/\bat [^\n]*\.(?:js|ts):\d+/);
  if (res.status >= 400) {
    const body = (res.body && typeof res.body === 'object' && Object.keys(res.body as object).length ? res.body : safeJson(res.text)) as Record<string, unknown> | undefined;
    if (body && 'toolCallId' in body) return; // a recorded outcome answers with the tool-call body
    expect(res.headers['content-type'], label).toMatch(/^application\/problem\+json/);
    expect(typeof body?.code, label).toBe('string');
  }
}

function safeJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}

/**
 * fast-check's options for a property run `n` times (FC_RUNS_FACTOR=10, say, for a deeper hunt than the default,
 * which keeps `npm test` fast). A failure is shrunk to a small counterexample (endOnFailure would report the first
 * one found, often a long string in which the culprit is hard to see).
 */
export const runs = (n: number): { numRuns: number } => ({ numRuns: Math.round(n * Number(process.env.FC_RUNS_FACTOR ?? 1)) });

/**
 * The own properties of `o`, each descriptor with a null prototype: a polluted Object.prototype (a `get` or a
 * symbol added) must not show through a lookup in them.
 */
const ownDescriptors = (o: object): Map<PropertyKey, PropertyDescriptor> =>
  new Map(Reflect.ownKeys(o).map((k) => [k, Object.assign(Object.create(null) as PropertyDescriptor, Reflect.getOwnPropertyDescriptor(o, k))]));

/** The built-ins' prototypes, with their own properties as the runtime made them (this module loads before any hostile input). */
const PROTOTYPES = ([['Object.prototype', Object.prototype], ['Array.prototype', Array.prototype], ['Function.prototype', Function.prototype]] as const).map(
  ([name, proto]) => ({ name, proto, pristine: ownDescriptors(proto) }),
);

/**
 * What differs from the pristine prototypes: a key added or removed, or a built-in replaced (its value, getter or
 * setter no longer the same function), e.g. `{"__proto__":{"toString": …}}` through a recursive merge. Each change
 * is put back as it is found, so that the next run (fast-check shrinking a failure) starts from clean prototypes
 * and the counterexample is the input that did it, not any input after it.
 */
function restoredChanges(): string[] {
  const changes: string[] = [];
  for (const { name, proto, pristine } of PROTOTYPES) {
    const now = ownDescriptors(proto);
    for (const key of new Set([...pristine.keys(), ...now.keys()])) {
      const was = pristine.get(key);
      const is = now.get(key);
      if (was && is && was.value === is.value && was.get === is.get && was.set === is.set) continue;
      changes.push(`${name}[${String(key)}] ${!was ? 'added' : !is ? 'removed' : 'replaced'}`);
      // Reflect: a change made non-configurable cannot be put back, and is still reported.
      if (was) Reflect.defineProperty(proto, key, was);
      else Reflect.deleteProperty(proto, key);
    }
  }
  return changes;
}

/** Object.prototype, Array.prototype and Function.prototype exactly as the runtime made them: no key added, removed or replaced. */
export function expectPrototypeClean(): void {
  const changes = restoredChanges();
  expect(changes, changes.join('; ')).toEqual([]);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(({} as Record<string, unknown>).action).toBeUndefined();
  expect(({} as Record<string, unknown>).toolName).toBeUndefined();
  expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
}
