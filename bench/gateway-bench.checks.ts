/**
 * Pure checks of the gateway benchmark (no I/O, unit-tested in
 * test/bench/gateway-bench.checks.spec.ts): the soak held its rate, the
 * blocked target never reached the vendor path, and the --log-level value.
 */
import type { TargetCheck } from './gateway-bench.report.js';

/**
 * The share of autocannon's pace a soak must hold. 95 %: a healthy run holds ~100 % of
 * it (the README's 300 s soaks answered 90,000 calls in 305.2 s, which is the pace
 * itself, see pacedSeconds; the slower day's 311 s is 98 %), and a gateway that falls
 * behind fails it. Without this check one that cannot keep up just takes longer and
 * still passes "0 errors": `amount` calls are sent however long they take.
 */
export const SOAK_MIN_RATE_SHARE = 0.95;

/**
 * Seconds autocannon's own schedule takes for `amount` calls at `overallRate` over
 * `connections` (its lib/run.js): each connection gets floor(x / n) of the amount and of
 * the rate, the first x mod n one more, and sends its rate's worth at the start of each
 * second. 300/s over 8 connections is 38 or 37 a second each, so 90,000 calls take 305 s.
 */
export function pacedSeconds(amount: number, overallRate: number, connections: number): number {
  const n = Math.min(connections, overallRate); // autocannon lowers the connections to the rate
  const share = (x: number, i: number): number => Math.floor(x / n) + (i + 1 <= x % n ? 1 : 0);
  let seconds = 0;
  for (let i = 0; i < n; i++) {
    const calls = share(amount, i);
    if (calls > 0) seconds = Math.max(seconds, Math.ceil(calls / share(overallRate, i)));
  }
  return seconds;
}

/** The achieved rate held `share` of the paced one. */
export function rateHeld(achievedRps: number, pacedRps: number, share = SOAK_MIN_RATE_SHARE): boolean {
  return Number.isFinite(achievedRps) && pacedRps > 0 && achievedRps >= share * pacedRps;
}

export interface SoakPace {
  amount: number;
  rate: number;
  connections: number;
}

/**
 * `lastAnswerSeconds`: from the start to the last answer (Sample.activeSeconds, not
 * autocannon's end, which comes up to ~2 s later whatever the gateway does). On pace the
 * last second's calls go out at pacedSeconds - 1, so the achieved rate is taken over the
 * time to the last answer plus that last second: an on-pace run of any length gives ~100 %.
 */
export function rateHeldCheck(accepted: number, lastAnswerSeconds: number, pace: SoakPace, share = SOAK_MIN_RATE_SHARE): TargetCheck {
  const paced = pacedSeconds(pace.amount, pace.rate, pace.connections);
  const pacedRps = paced > 0 ? pace.amount / paced : 0;
  const achieved = accepted > 0 ? accepted / (lastAnswerSeconds + 1) : 0;
  return {
    name: `soak: rate held (>= ${Math.round(share * 100)}% of the pace)`,
    met: rateHeld(achieved, pacedRps, share),
    detail:
      `${achieved.toFixed(1)}/s = ${pacedRps > 0 ? ((achieved / pacedRps) * 100).toFixed(1) : '–'}% of ${pacedRps.toFixed(1)}/s ` +
      `(${pace.rate}/s as autocannon paces it: ${pace.amount} calls in ${paced} s; ${accepted} accepted, the last answer at ${lastAnswerSeconds.toFixed(1)} s)`,
  };
}

/** What the ledger holds for the blocked target's tool (gateway-bench.ledger.ts). */
export interface BlockedCallStats {
  /** tool_calls rows of the blocked tool and action */
  rows: number;
  /** of them, rows whose status is not `blocked` */
  notBlocked: number;
  /** of them, rows with a started_at (the call was started toward its vendor) */
  started: number;
  /** tool_call.started events on those rows */
  startedEvents: number;
}

/**
 * A policy-blocked call must never start a vendor call: every row of the
 * blocked tool is `blocked`, none was started, no tool_call.started event.
 * `answered` = the 403 POLICY_BLOCKED answers the benchmark counted; each had a
 * unique tool_use id, so there are at least that many rows (fewer would mean
 * the answers were not the recorded calls this check looks at).
 */
export function blockedNeverStartedCheck(stats: BlockedCallStats, answered: number): TargetCheck {
  return {
    name: 'blocked: no vendor call (every row blocked, none started)',
    met: stats.rows > 0 && stats.rows >= answered && stats.notBlocked === 0 && stats.started === 0 && stats.startedEvents === 0,
    detail:
      `${stats.rows} rows for ${answered} 403 answers; ${stats.notBlocked} not blocked, ${stats.started} with started_at, ` +
      `${stats.startedEvents} tool_call.started events`,
  };
}

/** pino's levels, as the gateway's LOG_LEVEL accepts them (src/config/config.schema.ts). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function parseLogLevel(raw: string): LogLevel {
  const level = LOG_LEVELS.find((l) => l === raw);
  if (!level) throw new Error(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  return level;
}
