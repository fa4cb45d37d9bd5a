/**
 * One refund in flight per Shopify order, across replicas (VENDORS.md §1.9
 * point 6): two refunds of one order racing at Shopify can both pass its
 * "still refundable" check. The lease is a row of `shopify_refund_leases`
 * (shop × order: an order is the shop's, whichever org's credentials reach
 * it; so a call takes it only once its org's credentials have read the order,
 * never on a shop domain alone), taken by one conditional upsert — free,
 * expired, or already this call's — and deleted once the refund's outcome is
 * known. No
 * transaction and no pooled connection is held while the refund is at
 * Shopify: each statement is one round trip (the vendor_tokens lease works the
 * same way). A process that dies holding a lease only delays the order's
 * next refund until the lease expires.
 */
import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { failedStatementFields, isDatabaseUnavailable } from '../../common/errors/database-errors.js';
import type { FailedOutcome } from '../vendor-handler.js';
import { LEASE_RELEASE_RETRY, retryWhileUnavailable } from '../../common/errors/unavailable-retry.js';

/** The database access a lease needs: single statements on the pool (db/sql.ts), never a transaction. */
export interface LeaseSql {
  prepared<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
}

export interface RefundLeaseKey {
  /** the org whose call holds it (not part of the key: two orgs on one shop share the order's lease) */
  orgId: string;
  /** as resolveShopifyConnection accepted it: one spelling per shop (lower case, <shop>.myshopify.com) */
  shopDomain: string;
  /** the numeric order id */
  orderId: string;
}

export interface RefundLeases {
  /**
   * Waits until `holder` has the order's lease (null), or says why it could
   * not (a failed outcome: nothing was sent). Honours `signal`.
   */
  acquire(key: RefundLeaseKey, holder: string, signal: AbortSignal, deadline?: number): Promise<FailedOutcome | null>;
  /** Gives the lease up if `holder` still has it; never throws (the lease then expires). */
  release(key: RefundLeaseKey, holder: string): Promise<void>;
}

export interface RefundLeaseTiming {
  /** How long a lease lasts unless released (each attempt of the holding call renews it). */
  leaseMs: number;
  /** How long a refund waits for the order's other refund before giving up (nothing sent). */
  maxWaitMs: number;
}

/**
 * A call's whole budget (every attempt) is the vendor timeout, and an attempt
 * whose answer was lost may still be running at Shopify after it: the lease
 * outlives both with room to spare. A waiting refund gives up after half the
 * budget, keeping the other half for its own request.
 */
export function refundLeaseTiming(vendorTimeoutMs: number): RefundLeaseTiming {
  return { leaseMs: 2 * vendorTimeoutMs + 5_000, maxWaitMs: Math.floor(vendorTimeoutMs / 2) };
}

const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 200;

const ACQUIRE = `INSERT INTO shopify_refund_leases AS l (org_id, shop_domain, order_id, holder, lease_until)
  VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
  ON CONFLICT (shop_domain, order_id) DO UPDATE SET org_id = EXCLUDED.org_id, holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until
    WHERE l.lease_until < now() OR l.holder = EXCLUDED.holder
  RETURNING 1 AS held`;
const RELEASE = 'DELETE FROM shopify_refund_leases WHERE shop_domain = $1 AND order_id = $2 AND holder = $3';

export class SqlRefundLeases implements RefundLeases {
  private readonly log = new Logger('ShopifyRefundLeases');

  constructor(
    private readonly sql: LeaseSql,
    private readonly timing: RefundLeaseTiming,
  ) {}

  /**
   * `callDeadline` (performance.now() clock): the end of the call's budget. The wait ends early enough to leave the
   * refund maxWaitMs of it (half the budget) for its own request, however long the call spent before the wait
   * (the order read): a refund sent with almost no time left would end indeterminate for nothing.
   */
  async acquire(key: RefundLeaseKey, holder: string, signal: AbortSignal, callDeadline?: number): Promise<FailedOutcome | null> {
    const leftForWait = callDeadline === undefined ? this.timing.maxWaitMs : callDeadline - this.timing.maxWaitMs - performance.now();
    const deadline = performance.now() + Math.min(this.timing.maxWaitMs, leftForWait);
    let pollMs = FIRST_POLL_MS;
    for (;;) {
      if (signal.aborted) return busy();
      if (performance.now() > deadline) return pollMs === FIRST_POLL_MS ? noRoom() : busy(); // no room left for the refund's own request
      try {
        const held = await this.sql.prepared(ACQUIRE, [key.orgId, key.shopDomain, key.orderId, holder, this.timing.leaseMs / 1000]);
        if (held.length > 0) return null;
      } catch (err) {
        // Without the lease the refund could race another one: it is not sent. The gateway's trouble, not Shopify's.
        const unavailable = isDatabaseUnavailable(err);
        this.log.warn({ orgId: key.orgId, ...failedStatementFields(err) }, 'refund lease not taken');
        return {
          ok: false,
          kind: 'network',
          requestSent: false,
          local: true,
          message: `the order's refund lease could not be taken${unavailable ? ': the database is unavailable' : ''}; the refund was not sent`,
        };
      }
      if (performance.now() + pollMs > deadline) return busy();
      try {
        await sleep(pollMs, undefined, { signal });
      } catch {
        return busy(); // the call's budget ran out while waiting
      }
      pollMs = Math.min(MAX_POLL_MS, pollMs * 2);
    }
  }

  async release(key: RefundLeaseKey, holder: string): Promise<void> {
    try {
      // Tried again through a short outage (a dropped connection, a failover): held on, the lease made the order's next
      // refund wait half its budget and fail with nothing sent, for as long as the lease lasts.
      await retryWhileUnavailable(() => this.sql.prepared(RELEASE, [key.shopDomain, key.orderId, holder]), LEASE_RELEASE_RETRY);
    } catch (err) {
      this.log.warn({ orgId: key.orgId, ...failedStatementFields(err) }, 'refund lease not released: it expires on its own');
    }
  }
}

/** The call spent too much of its budget before the refund (a slow order read): sending it now could end unknown. */
function noRoom(): FailedOutcome {
  return {
    ok: false,
    kind: 'timeout',
    requestSent: false,
    local: true,
    message: 'too little of the call\'s time budget was left to send the refund and read its answer: this refund was not sent',
  };
}

/** Another refund of the order held the lease for the whole wait: a transient failure, and this one never left. */
function busy(): FailedOutcome {
  return {
    ok: false,
    kind: 'timeout',
    requestSent: false,
    local: true,
    message: 'another refund of this order was still in flight at shopify: this refund was not sent',
  };
}
