import { describe, expect, it } from 'vitest';
import { ConcurrencyLeases } from './concurrency-lease.js';

describe('ConcurrencyLeases', () => {
  it('hands out up to the limit per key, and a release (once) gives one back', () => {
    const leases = new ConcurrencyLeases(2);
    const a = leases.acquire('o:v')!;
    const b = leases.acquire('o:v')!;
    expect(leases.acquire('o:v')).toBeNull();
    expect(leases.acquire('o:other')).not.toBeNull();
    a();
    a();
    expect(leases.count('o:v')).toBe(1);
    expect(leases.acquire('o:v')).not.toBeNull();
    b();
  });

  it('a reservation for an approved call refuses new calls until an approved call takes a slot, or it lapses', () => {
    const clock = { now: 0 };
    const leases = new ConcurrencyLeases(1, () => clock.now);
    const direct = leases.acquire('o:v')!;
    expect(leases.acquire('o:v', 'call-a')).toBeNull(); // full: the approved call is deferred ...
    leases.reserve('o:v', 10_000, 'call-a'); // ... and reserves the next free slot
    direct();
    expect(leases.acquire('o:v')).toBeNull(); // free, but kept for it
    expect(leases.acquire('o:other')).not.toBeNull(); // another org × vendor is not held
    const approved = leases.acquire('o:v', 'call-a')!;
    expect(approved).not.toBeNull();
    approved();
    expect(leases.acquire('o:v')).not.toBeNull(); // the reservation ended with it
  });

  it('a reservation nobody takes lapses', () => {
    const clock = { now: 0 };
    const leases = new ConcurrencyLeases(1, () => clock.now);
    leases.reserve('o:v', 10_000, 'call-a');
    expect(leases.acquire('o:v')).toBeNull();
    clock.now = 10_000;
    expect(leases.acquire('o:v')).not.toBeNull();
  });

  it('a reservation ends when no call it is kept for still waits (unreserve), not before', () => {
    const clock = { now: 0 };
    const leases = new ConcurrencyLeases(1, () => clock.now);
    leases.reserve('o:v', 10_000, 'call-a');
    leases.reserve('o:v', 10_000, 'call-b'); // a second approved call deferred on the same org × vendor
    leases.reserve('o:w', 10_000, 'call-c');
    expect(leases.reservationHolders().sort()).toEqual(['call-a', 'call-b', 'call-c']);
    leases.unreserve('call-a');
    expect(leases.acquire('o:v')).toBeNull(); // still kept for call-b
    leases.unreserve('call-unknown');
    leases.unreserve('call-b');
    expect(leases.reservationHolders()).toEqual(['call-c']);
    const direct = leases.acquire('o:v');
    expect(direct).not.toBeNull(); // nobody waits for it any more: free for new calls
    direct!();
    expect(leases.acquire('o:w')).toBeNull(); // another org × vendor's reservation is untouched
  });

  it('kept for two approved calls: the first taking a slot leaves it kept for the second, which still waits', () => {
    const clock = { now: 0 };
    const leases = new ConcurrencyLeases(1, () => clock.now);
    const direct = leases.acquire('o:v')!;
    expect(leases.acquire('o:v', 'call-a')).toBeNull();
    leases.reserve('o:v', 10_000, 'call-a');
    expect(leases.acquire('o:v', 'call-b')).toBeNull();
    leases.reserve('o:v', 10_000, 'call-b');
    direct();
    const a = leases.acquire('o:v', 'call-a')!; // A takes the slot
    expect(a).not.toBeNull();
    a(); // A is done: the slot is free, and B still waits for it
    expect(leases.reservationHolders()).toEqual(['call-b']);
    expect(leases.acquire('o:v')).toBeNull(); // a direct call does not take B's slot
    const b = leases.acquire('o:v', 'call-b')!;
    expect(b).not.toBeNull();
    b();
    expect(leases.reservationHolders()).toEqual([]);
    expect(leases.acquire('o:v')).not.toBeNull(); // nobody waits: free for new calls
  });

  it('a slot given back wakes the approved calls it is kept for (once the turn ends), not others, and not once they stopped waiting', async () => {
    const leases = new ConcurrencyLeases(1);
    const woken: string[] = [];
    const direct = leases.acquire('o:v')!;
    leases.reserve('o:v', 10_000, 'call-a', () => woken.push('a'));
    leases.reserve('o:other', 10_000, 'call-b', () => woken.push('b'));
    direct();
    expect(woken).toEqual([]); // not within the release itself
    await new Promise((r) => setImmediate(r));
    expect(woken).toEqual(['a']);
    const taken = leases.acquire('o:v', 'call-a')!; // woken, it takes the slot: it no longer waits
    taken();
    await new Promise((r) => setImmediate(r));
    expect(woken).toEqual(['a']);
    // Unreserved (its run ended) before a slot came free: never woken.
    const again = leases.acquire('o:v')!;
    leases.reserve('o:v', 10_000, 'call-c', () => woken.push('c'));
    leases.unreserve('call-c');
    again();
    await new Promise((r) => setImmediate(r));
    expect(woken).toEqual(['a']);
  });
});
