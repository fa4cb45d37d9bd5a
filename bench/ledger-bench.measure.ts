import type { DataSource } from 'typeorm';

/** Timing and EXPLAIN helpers of the benchmark. */
export interface Stats {
  iterations: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  max: number;
}

export function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  const round = (n: number): number => Math.round(n * 100) / 100;
  return { iterations: s.length, p50: round(q(50)), p95: round(q(95)), p99: round(q(99)), mean: round(s.reduce((a, b) => a + b, 0) / s.length), max: round(s[s.length - 1]) };
}

export async function time(fn: (i: number) => Promise<unknown>, iterations: number): Promise<Stats> {
  for (let i = 0; i < Math.min(20, iterations); i++) await fn(i); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    await fn(i);
    samples.push(performance.now() - t0);
  }
  return stats(samples);
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/** The plan's access paths, e.g. "Limit > Index Scan(tool_calls_org_status_idx)". */
function planSummary(node: PlanNode): string {
  const self = node['Index Name'] ? `${node['Node Type']}(${node['Index Name']})` : node['Relation Name'] ? `${node['Node Type']}(${node['Relation Name']})` : node['Node Type'];
  const kids = (node.Plans ?? []).map(planSummary);
  return kids.length ? `${self} > ${kids.length > 1 ? `[${kids.join(' | ')}]` : kids[0]}` : self;
}

export async function explain(ds: DataSource, sql: string, params: unknown[]): Promise<{ plan: string; executionMs: number; buffers: number }> {
  const [row] = (await ds.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, params)) as { 'QUERY PLAN': [{ Plan: PlanNode & { 'Shared Hit Blocks': number; 'Shared Read Blocks': number }; 'Execution Time': number }] }[];
  const top = row['QUERY PLAN'][0];
  return { plan: planSummary(top.Plan), executionMs: Math.round(top['Execution Time'] * 100) / 100, buffers: top.Plan['Shared Hit Blocks'] + top.Plan['Shared Read Blocks'] };
}

export interface QueryResult extends Stats {
  plan?: string;
  explainMs?: number;
  buffers?: number;
}

