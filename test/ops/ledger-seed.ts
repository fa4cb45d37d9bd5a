import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { manifestDigest } from '../../src/runs/run-manifest.js';

/** Direct SQL seeding for the ops tests: the pipeline that normally writes these rows is tested elsewhere. */
export interface CallSeed {
  id?: string;
  orgId: string;
  runId: string;
  toolName?: string;
  action?: string;
  status?: string;
  errorCode?: string | null;
  errorText?: string | null;
  correlationId?: string;
  /** exact text with microseconds, e.g. 2026-01-05T10:00:00.123456Z; default now() */
  createdAt?: string;
  costCents?: number;
  /** Default 42; null for a call no outcome was recorded for (verify holds the row to its events). */
  durationMs?: number | null;
  inputRedacted?: unknown;
  outputRedacted?: unknown;
  policyDecisionId?: string | null;
}

export interface SeededCall extends Required<Omit<CallSeed, 'createdAt'>> {
  createdAt: string;
}

/** A run row alone, with no event: for specs that do not verify the ledger (verify finds it written around the gateway). */
export async function insertRun(ds: DataSource, orgId: string, specialistId = 'support'): Promise<string> {
  const id = randomUUID();
  await ds.query(
    `INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, $3, 'running', '{"runtimeManifest":{"allowedTools":[]}}')`,
    [id, orgId, specialistId],
  );
  return id;
}

/**
 * A run as RunsService.create writes it: the row and its run.created event in one statement, so ledger verify, which
 * holds every run to its events (src/ledger/run-check.ts), finds it in order. The event is sealed by the next pass.
 */
export async function insertRunOnLedger(ds: DataSource, orgId: string, specialistId = 'support'): Promise<string> {
  const id = randomUUID();
  await ds.query(
    `WITH r AS (INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, $3, 'running', '{"runtimeManifest":{"allowedTools":[]}}'))
     INSERT INTO runtime_ledger_events (id, org_id, type, run_id, metadata) VALUES (gen_random_uuid(), $2, 'run.created', $1, $4::jsonb)`,
    [id, orgId, specialistId, JSON.stringify({ specialistId, allowedToolCount: 0, manifestDigest: manifestDigest([]) })],
  );
  return id;
}

/** Inserts the calls in one statement and returns them with their exact created_at text. */
export async function insertCalls(ds: DataSource, seeds: CallSeed[]): Promise<SeededCall[]> {
  const rows = seeds.map((s) => ({
    id: s.id ?? randomUUID(),
    orgId: s.orgId,
    runId: s.runId,
    toolName: s.toolName ?? 'order_lookup',
    action: s.action ?? 'lookup',
    status: s.status ?? 'succeeded',
    errorCode: s.errorCode ?? null,
    errorText: s.errorText ?? null,
    correlationId: s.correlationId ?? `corr-${randomUUID()}`,
    createdAt: s.createdAt ?? null,
    costCents: s.costCents ?? 0,
    durationMs: s.durationMs === undefined ? 42 : s.durationMs,
    inputRedacted: s.inputRedacted ?? { orderId: '12345' },
    outputRedacted: s.outputRedacted ?? null,
    policyDecisionId: s.policyDecisionId ?? null,
  }));
  const out = (await ds.query(
    `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, error_code, error_text, correlation_id,
                             idempotency_key, tool_use_id, action_digest, input_redacted, output_redacted, risk_level, policy_decision_id,
                             cost_cents, duration_ms, created_at, started_at, finished_at)
     SELECT x.id, x."orgId", x."runId", 'support', x."toolName", x.action, x.status, x."errorCode", x."errorText", x."correlationId",
            'idem-' || x.id, 'toolu_' || replace(x.id::text, '-', ''), repeat('ab', 32), x."inputRedacted", x."outputRedacted", 'low',
            x."policyDecisionId", x."costCents", x."durationMs", coalesce(x."createdAt", now()), coalesce(x."createdAt", now()), coalesce(x."createdAt", now())
       FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, "orgId" uuid, "runId" uuid, "toolName" text, action text, status text, "errorCode" text,
            "errorText" text, "correlationId" text, "createdAt" timestamptz, "costCents" int, "durationMs" int, "inputRedacted" jsonb, "outputRedacted" jsonb,
            "policyDecisionId" uuid)
     RETURNING id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_iso`,
    [JSON.stringify(rows)],
  )) as { id: string; created_iso: string }[];
  const created = new Map(out.map((r) => [r.id, r.created_iso]));
  return rows.map((r) => ({ ...r, createdAt: created.get(r.id)! }));
}

/** Newest first by (createdAt DESC, id DESC): the ledger order (fixed-width UTC text and lowercase uuids compare as the database does). */
export function ledgerOrder<T extends { createdAt: string; id: string }>(rows: T[]): T[] {
  return [...rows].sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1));
}

/** A timestamp `micros` microseconds after 2026-01-01T00:00:00Z, as exact text. */
export function microsAfterEpoch2026(micros: number): string {
  const ms = Math.floor(micros / 1000);
  const d = new Date(Date.UTC(2026, 0, 1) + ms).toISOString().slice(0, 19);
  const frac = String(micros % 1_000_000).padStart(6, '0');
  return `${d}.${frac}Z`;
}
