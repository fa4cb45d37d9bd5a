import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { droppedLines } from '../logging/output-streams.js';

/**
 * All Prometheus metrics of the process. Labels carry only bounded, safe
 * values (route templates, tool names, status and error codes), never ids or data.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly toolCalls = new Counter({
    name: 'tool_calls_total',
    help: 'Tool calls by tool, action, status and error code as answered to the caller (status "rejected": a 429 CONCURRENCY_LIMIT, refused before it was recorded; a call waiting for approval counts when answered and again when it runs, or is blocked as it would; rejections, expiries, run ends and sweeps settle calls without counting them here: see the ledger)',
    labelNames: ['tool', 'action', 'status', 'error_code'] as const,
    registers: [this.registry],
  });

  readonly vendorLatency = new Histogram({
    name: 'vendor_call_duration_seconds',
    help: 'Vendor call latency (one attempt: the time its exchanges with the vendor were under way, not the gateway\'s own waits) by vendor and outcome',
    labelNames: ['vendor', 'outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly breakerState = new Gauge({
    name: 'vendor_circuit_breaker_open',
    help: 'Org x vendor circuit breakers of this process refusing calls now (open within its cooldown, or half_open with its one probe out), by vendor and state',
    labelNames: ['vendor', 'state'] as const,
    registers: [this.registry],
  });

  readonly pendingApprovals = new Gauge({
    name: 'approvals_pending',
    help: 'Approval requests pending and not yet past their expiry, counted every 15 s, by kind (expert: the experts\' queue; client: waiting on the customer)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly approvalsExpired = new Counter({
    name: 'approvals_expired_total',
    help: 'Approval requests that expired undecided (their calls blocked APPROVAL_EXPIRED), by kind, as written by this process',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly ledgerWrite = new Histogram({
    name: 'ledger_write_duration_seconds',
    help: 'Time a ledger write (intent or outcome) took, committed (result ok) or failed (result error: a timeout, a lost connection)',
    labelNames: ['kind', 'result'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  /**
   * `write` timed into ledger_write_duration_seconds, failed ones too: a statement waiting on a lock until its timeout
   * cancelled it was never observed, so during that very incident (503 DATABASE_UNAVAILABLE) the histogram showed no
   * slow writes, only fewer.
   */
  async timedLedgerWrite<T>(kind: 'intent' | 'outcome', write: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    let result: 'ok' | 'error' = 'error';
    try {
      const out = await write();
      result = 'ok';
      return out;
    } finally {
      this.ledgerWrite.observe({ kind, result }, (performance.now() - t0) / 1000);
    }
  }

  readonly indeterminateCalls = new Gauge({
    name: 'tool_calls_indeterminate',
    help: 'Tool calls whose outcome is unknown (indeterminate) and not yet reconciled, across every org, counted from the database every 15 s: each may have happened at the vendor and waits for ops to check and settle it',
    registers: [this.registry],
  });

  readonly indeterminateOldest = new Gauge({
    name: 'tool_calls_indeterminate_oldest_seconds',
    help: 'Age (since it was requested) of the oldest tool call still indeterminate, counted every 15 s; 0 when there is none',
    registers: [this.registry],
  });

  readonly ledgerChainsStopped = new Gauge({
    name: 'ledger_chains_stopped',
    help: 'Orgs whose ledger chain the sealer stopped at an event it cannot hash (their later events wait), as this replica last saw',
    registers: [this.registry],
  });

  readonly logLinesDropped = new Counter({
    name: 'log_lines_dropped_total',
    help: 'Lines this process could not write, by stream (stdout: the JSON log; stderr): its reader gone, its disk full, its terminal hung up, or its reader too far behind (src/logging/output-streams.ts)',
    labelNames: ['stream'] as const,
    registers: [this.registry],
  });

  private readonly scrapeHooks: (() => void | Promise<void>)[] = [];

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // Counted by output-streams.ts for the whole process; brought here when scraped.
    const seen = { stdout: 0, stderr: 0 };
    for (const stream of ['stdout', 'stderr'] as const) this.logLinesDropped.inc({ stream }, 0);
    this.onScrape(() => {
      const now = droppedLines();
      for (const stream of ['stdout', 'stderr'] as const) {
        if (now[stream] > seen[stream]) this.logLinesDropped.inc({ stream }, now[stream] - seen[stream]);
        seen[stream] = now[stream];
      }
    });
  }

  /** Gauges that are cheaper to compute when scraped than to keep current on every call. */
  onScrape(hook: () => void | Promise<void>): void {
    this.scrapeHooks.push(hook);
  }

  async render(): Promise<string> {
    for (const hook of this.scrapeHooks) await hook();
    return this.registry.metrics();
  }
}
