/**
 * PostgreSQL's plan of a statement, for the specs that check an index serves a query (approval listings, ledger
 * verify, rare-value lookups): plans, not timings, since the planner's choice is what an index decides.
 */

/** A node of EXPLAIN (FORMAT JSON), with the fields those specs read (the Actual ones only with ANALYZE). */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

/** Every node of `sql`'s plan with `params`, the top one first, then each node's children in order. */
export async function planNodes(db: { query(sql: string, params?: unknown[]): Promise<unknown> }, sql: string, params: unknown[], opts: { analyze?: boolean } = {}): Promise<PlanNode[]> {
  const [{ 'QUERY PLAN': [top] }] = (await db.query(`EXPLAIN (${opts.analyze ? 'ANALYZE, ' : ''}FORMAT JSON) ${sql}`, params)) as { 'QUERY PLAN': { Plan: PlanNode }[] }[];
  const flat = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(flat)];
  return flat(top.Plan);
}

/** "Limit , Index Scan approval_requests_run_idx, …": each node's type and its index or table, for a failure message. */
export const planSummary = (plan: PlanNode[]): string => plan.map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}`).join(', ');
