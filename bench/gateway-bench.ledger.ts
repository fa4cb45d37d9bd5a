/**
 * What the benchmark reads back from the ledger after the load: the rows and
 * events of the blocked target's tool, to check that no blocked call started
 * a vendor call (the emulator runs as its own process with no request counter,
 * and every call the gateway starts toward a vendor is a row with started_at
 * and a tool_call.started event before the vendor is sent anything).
 */
import pg from 'pg';
import type { BlockedCallStats } from './gateway-bench.checks.js';

/** Runs one parameterized statement; rows as objects (pg.Client#query, or TypeORM's DataSource#query in tests). */
export type RowQuery = (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>;

/** The ledger of `orgId` for one tool and action (the recorded names: tool_calls.tool_name / action). */
export async function blockedCallStats(query: RowQuery, orgId: string, toolName: string, action: string): Promise<BlockedCallStats> {
  const [calls] = await query(
    `SELECT count(*)::bigint AS rows,
            count(*) FILTER (WHERE status <> 'blocked')::bigint AS not_blocked,
            count(*) FILTER (WHERE started_at IS NOT NULL)::bigint AS started
       FROM tool_calls WHERE org_id = $1 AND tool_name = $2 AND action = $3`,
    [orgId, toolName, action],
  );
  const [events] = await query(
    `SELECT count(*)::bigint AS n
       FROM runtime_ledger_events e JOIN tool_calls c ON c.id = e.tool_call_id
      WHERE e.org_id = $1 AND e.type = 'tool_call.started' AND c.org_id = $1 AND c.tool_name = $2 AND c.action = $3`,
    [orgId, toolName, action],
  );
  return { rows: Number(calls.rows), notBlocked: Number(calls.not_blocked), started: Number(calls.started), startedEvents: Number(events.n) };
}

/** blockedCallStats on the benchmark's database. */
export async function blockedCallStatsAt(dbUrl: string, orgId: string, toolName: string, action: string): Promise<BlockedCallStats> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    return await blockedCallStats(async (sql, params) => (await c.query<Record<string, unknown>>(sql, params)).rows, orgId, toolName, action);
  } finally {
    await c.end();
  }
}
