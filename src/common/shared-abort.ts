import { setMaxListeners } from 'node:events';

/**
 * An AbortController for a process-wide stop (shutdown) that any number of waits listen on at once, each removing
 * its listener when it ends: outcome writes kept through a database outage, approval claims, result long-polls.
 * Node's default limit of 10 listeners would print "MaxListenersExceededWarning: Possible EventTarget memory leak"
 * as soon as the eleventh waits: a false alarm on stderr, in an outage, when operators read it.
 */
export function sharedAbortController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
