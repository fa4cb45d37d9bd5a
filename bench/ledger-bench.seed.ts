import type { DataSource } from 'typeorm';

/**
 * The benchmark's data, made in SQL (multi-row INSERT ... SELECT FROM
 * generate_series: no round trip per row). One org holds 30% of the calls,
 * the other 99 share the rest; tools and outcomes are skewed like real traffic.
 */
export const ORGS = 100;

/** Deterministic ids, so queries can name orgs and runs without reading them back. */
export const v4 = (md5: string): string => `overlay(overlay(${md5} placing '4' from 13) placing '8' from 17)::uuid`;
export const orgIdSql = (expr: string): string => v4(`md5('bench-org-' || (${expr}))`);
const runIdSql = (expr: string): string => v4(`md5('bench-run-' || (${expr}))`);
/** Run r's org: 30% of runs belong to org 0, the others spread over orgs 1..99. */
const orgOfRunSql = (r: string): string => `(CASE WHEN (${r}) % 10 < 3 THEN 0 ELSE 1 + (${r}) % 99 END)`;

/** tool, action, cost, share of calls in ‰: skewed like real traffic (lookups common, money moves rare). */
const TOOLS = [
  ['order_lookup', 'lookup', 1, 400],
  ['shopify_query', 'get_product', 1, 200],
  ['amazon_query', 'get_order', 0, 150],
  ['amazon_query', 'get_order_items', 0, 100],
  ['shopify_order', 'add_note', 2, 60],
  ['kyc', 'get_status', 0, 50],
  ['nango_proxy', 'get', 0, 25],
  ['shopify_refund', 'create', 5, 10],
  ['nango_proxy', 'post', 0, 5],
] as const;
/** SQL picking a TOOLS index (0-based) from w in 0..999 by the shares above. */
const toolIndexSql = (w: string): string => {
  let acc = 0;
  return `CASE ${TOOLS.slice(0, -1).map((tool, i) => `WHEN ${w} < ${(acc += tool[3])} THEN ${i}`).join(' ')} ELSE ${TOOLS.length - 1} END`;
};
const FAILED_CODES = ['VENDOR_ERROR', 'VENDOR_TIMEOUT', 'VENDOR_RATE_LIMITED', 'VENDOR_NOT_FOUND', 'CIRCUIT_OPEN', 'CREDENTIALS_INVALID', 'CREDENTIALS_NOT_FOUND', 'EXECUTION_ERROR', 'INVALID_INPUT'];
const BLOCKED_CODES = ['POLICY_BLOCKED', 'FEATURE_DISABLED', 'NOT_IN_MANIFEST', 'EXPERT_REJECTED', 'APPROVAL_EXPIRED'];
const sqlArray = (xs: readonly (string | number)[]): string => `ARRAY[${xs.map((x) => (typeof x === 'number' ? String(x) : `'${x}'`)).join(',')}]`;

export async function seed(ds: DataSource, ROWS: number, RUNS: number, log: (line: string) => void): Promise<void> {
  await ds.transaction(async (m) => {
    await m.query(`SET LOCAL synchronous_commit = off`);
    await m.query(`INSERT INTO orgs (id, name, created_at) SELECT ${orgIdSql('o')}, 'bench org ' || o, now() - interval '400 days' FROM generate_series(0, ${ORGS - 1}) o`);
    await m.query(
      `INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata, created_at)
       SELECT ${runIdSql('r')}, ${orgIdSql(orgOfRunSql('r'))}, 'specialist-' || (r % 5), 'running',
              '{"runtimeManifest":{"allowedTools":[]}}', now() - interval '31 days'
         FROM generate_series(0, ${RUNS - 1}) r`,
    );
    // Calls spread over 30 days in insertion order (an append-only table interleaving every org), with
    // outcomes: 80% succeeded, 10% failed, 6% blocked, 2% waiting approval, 1% indeterminate, 1% requested.
    const chunk = 250_000;
    for (let from = 0; from < ROWS; from += chunk) {
      const to = Math.min(ROWS, from + chunk) - 1;
      // Two events per call (requested, then its outcome), already sealed: the bench never runs the sealer over them.
      await m.query(
        `WITH calls AS (
           INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, vendor, status, error_code, correlation_id,
                                   idempotency_key, tool_use_id, action_digest, input_redacted, output_redacted, risk_level, policy_decision_id,
                                   retry_count, duration_ms, cost_cents, created_at, started_at, finished_at, updated_at)
           SELECT ${v4("md5('bench-call-' || g)")}, ${orgIdSql(orgOfRunSql('g % ' + RUNS))}, ${runIdSql('g % ' + RUNS)}, 'specialist-' || (g % 5),
                  (${sqlArray(TOOLS.map((t) => t[0]))})[t + 1], (${sqlArray(TOOLS.map((t) => t[1]))})[t + 1], 'vendor',
                  CASE WHEN x < 800 THEN 'succeeded' WHEN x < 900 THEN 'failed' WHEN x < 960 THEN 'blocked'
                       WHEN x < 980 THEN 'waiting_approval' WHEN x < 990 THEN 'indeterminate' ELSE 'requested' END,
                  CASE WHEN x < 800 THEN NULL
                       WHEN x < 900 THEN (${sqlArray(FAILED_CODES)})[1 + e % ${FAILED_CODES.length}]
                       WHEN x < 960 THEN (${sqlArray(BLOCKED_CODES)})[1 + e % ${BLOCKED_CODES.length}]
                       WHEN x < 980 THEN NULL WHEN x < 990 THEN 'OUTCOME_UNKNOWN' ELSE NULL END,
                  'corr-' || g, 'idem-' || g, 'toolu_' || g, md5('digest-' || g) || md5('digest2-' || g),
                  jsonb_build_object('orderId', (100000 + g)::text, 'accessToken', '[REDACTED]'),
                  CASE WHEN x < 800 THEN '{"status":"shipped","email":"[REDACTED]","zip":"94107"}'::jsonb END,
                  'low', CASE WHEN x >= 900 AND x < 980 THEN ${v4(`md5('bench-decision-' || ${v4("md5('bench-call-' || g)")}::text)`)} END,
                  0, 20 + e % 400, (${sqlArray(TOOLS.map((t) => t[2]))})[t + 1], ts, ts, ts, ts
             FROM (SELECT g, (hashint4(g) & 1023) % 1000 AS x, (hashint4(g + 1) & 1023) AS e, ${toolIndexSql('(hashint4(g + 2) & 1023) % 1000')} AS t,
                          now() - interval '30 days' + (g::float8 / ${ROWS}) * interval '30 days' AS ts
                     FROM generate_series(${from}, ${to}) g) s
           RETURNING id, org_id, run_id, tool_name, action, status, idempotency_key, created_at)
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata, created_at, chain_seq, prev_hash, hash, sealed_at)
         SELECT ${v4("md5('bench-event-' || c.id || k)")}, c.org_id, CASE WHEN k = 0 THEN 'tool_call.requested' ELSE 'tool_call.' || c.status END,
                c.run_id, c.id, '{"keyId":null,"role":"agent"}', jsonb_build_object('toolName', c.tool_name, 'action', c.action),
                c.created_at + k * interval '1 millisecond', substr(c.idempotency_key, 6)::bigint * 2 + k + 1, md5(c.id::text), md5(c.id::text || k),
                c.created_at
           FROM calls c CROSS JOIN generate_series(0, 1) k`,
      );
      log(`  seeded ${to + 1} calls`);
    }
    await m.query(
      `INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, rule_id, reason, action_digest, created_at)
       SELECT ${v4("md5('bench-decision-' || id)")}, org_id, id, CASE WHEN status = 'blocked' THEN 'block' ELSE 'require_expert_approval' END,
              'high', 'bench-rule', 'benchmark', action_digest, created_at
         FROM tool_calls WHERE status IN ('blocked', 'waiting_approval')`,
    );
    await m.query(
      `INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, risk_level, reason,
                                      action_digest, created_at, expires_at)
       SELECT ${v4("md5('bench-approval-' || id)")}, org_id, id, run_id, 'expert', 'pending', tool_name, action, input_redacted, 'high', 'benchmark',
              action_digest, created_at, now() + interval '30 days'
         FROM tool_calls WHERE status = 'waiting_approval'`,
    );
  });
}

