import { ownString } from '../own-string.js';

/**
 * `map.set(key, value)` with at most `max` entries: the entries stored longest ago (a key set again counts from
 * then) make room, one at a time. Dropping every entry at the bound instead let one org's flood of new keys (runs,
 * orgs) empty the cache for everyone at once, each hot entry then read again from the database. A string key is
 * stored as a copy of its own (ownString): one cut from a request's URL would keep the whole URL alive as long as
 * the entry, and the bound counts entries, not bytes.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  while (map.size >= Math.max(1, max)) map.delete(map.keys().next().value as K);
  map.set(typeof key === 'string' ? (ownString(key) as K) : key, value);
}
