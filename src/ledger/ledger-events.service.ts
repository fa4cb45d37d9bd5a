import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { newId } from '../common/ids.js';
import type { EventActor } from './ledger-event.entity.js';

export interface NewLedgerEvent {
  orgId: string;
  type: string;
  runId?: string | null;
  toolCallId?: string | null;
  actor?: EventActor | null;
  /** Safe facts only: ids, codes, digests, durations. Never secrets or raw tool data. */
  metadata?: Record<string, unknown>;
}

/**
 * Appends events. Appends are plain inserts (no lock, no read of the chain
 * head), so an org's traffic is never serialized by its own audit trail; the
 * LedgerSealer links them into the hash chain shortly after commit.
 */
@Injectable()
export class LedgerEventsService {
  constructor(private readonly ds: DataSource) {}

  async append(events: NewLedgerEvent[], manager?: EntityManager): Promise<void> {
    if (events.length === 0) return;
    const { sql, params } = insertEventsSql(events);
    await (manager ?? this.ds.manager).query(sql, params);
  }
}

/** One multi-row INSERT; exported so hot-path statements can embed it. */
export function insertEventsSql(events: NewLedgerEvent[], startParam = 1): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const rows = events.map((e) => {
    const base = startParam + params.length;
    params.push(newId(), e.orgId, e.type, e.runId ?? null, e.toolCallId ?? null, e.actor ? JSON.stringify(e.actor) : null, JSON.stringify(e.metadata ?? {}));
    return `($${base}, $${base + 1}, $${base + 2}, $${base + 3}, $${base + 4}, $${base + 5}::jsonb, $${base + 6}::jsonb)`;
  });
  return {
    sql: `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata) VALUES ${rows.join(', ')}`,
    params,
  };
}
