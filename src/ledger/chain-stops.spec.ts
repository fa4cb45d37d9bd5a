import { describe, expect, it } from 'vitest';
import { ChainStops } from './chain-stops.js';

describe('ChainStops', () => {
  it('holds back only the stopped org’s events after the stop', () => {
    const s = new ChainStops();
    expect(s.stop('a', 10, 'e10')).toBe(true);
    expect(s.waits('a', 11)).toBe(true);
    expect(s.waits('a', 10)).toBe(false); // the stop itself is tried again (it may have been repaired)
    expect(s.waits('a', 9)).toBe(false); // an older event committed late still goes on the chain before it
    expect(s.waits('b', 11)).toBe(false);
    expect(s.size).toBe(1);
  });

  it('reports a stop as new once, and moves it to an earlier unhashable event', () => {
    const s = new ChainStops();
    expect(s.stop('a', 10, 'e10')).toBe(true);
    expect(s.stop('a', 10, 'e10')).toBe(false);
    expect(s.stop('a', 12, 'e12')).toBe(false);
    expect(s.stop('a', 7, 'e7')).toBe(true);
    expect(s.waits('a', 8)).toBe(true);
  });

  it('a full scan lifts the stops it did not meet again, and keeps the others', () => {
    const s = new ChainStops();
    s.stop('a', 10, 'e10');
    s.stop('b', 20, 'e20');
    s.fullScanStarted();
    s.stop('b', 20, 'e20');
    expect(s.fullScanDone()).toEqual([['a', { seq: 10, eventId: 'e10' }]]);
    expect(s.waits('a', 11)).toBe(false);
    expect(s.waits('b', 21)).toBe(true);
  });

  it('an interrupted full scan lifts nothing: the next one starts over', () => {
    const s = new ChainStops();
    s.stop('a', 10, 'e10');
    s.fullScanStarted(); // lock lost part-way: fullScanDone never comes
    s.fullScanStarted();
    s.stop('a', 10, 'e10');
    expect(s.fullScanDone()).toEqual([]);
    expect(s.size).toBe(1);
  });
});
