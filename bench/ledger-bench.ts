import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { InitialSchema1764500000000 } from '../migrations/1764500000000-initial-schema.js';
import { createGateway } from '../src/bootstrap.js';
import { runMigrations } from '../src/db/migration-runner.js';
import { projectRoot } from '../src/common/project-root.js';
import { loadConfig } from '../src/config/app-config.js';
import { dbOptions } from '../src/db/db-options.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded-postgres.js';
import type { CursorPosition } from '../src/ops/ledger-cursor.js';
import { ledgerEventsPageSql } from '../src/ops/ledger-events.sql.js';
import { loadToolCallStory } from '../src/ops/tool-call-story.js';
import { toolCallByIdSql, toolCallsPageSql, type ToolCallFilters, type ToolCallRow } from '../src/ops/tool-calls.sql.js';
import { explain, time as timeN, type QueryResult, type Stats } from './ledger-bench.measure.js';
import { ORGS, orgIdSql, seed } from './ledger-bench.seed.js';

/**
 * `npm run bench:ledger`: seeds 1,000,000 tool calls across 100 orgs (one org
 * holds 30% of them, the rest share the remainder) plus 2,000,000 events,
 * then times the ops queries with the exact SQL the service runs (imported
 * from src/ops) and again over HTTP against the real app. Prints p50/p95/p99
 * and EXPLAIN's choice of index per query; writes bench/results/ledger.json.
 *
 * Env: DATABASE_URL (a server to create a scratch database on; default: an
 * embedded PostgreSQL), BENCH_ROWS (default 1000000), BENCH_ITERATIONS
 * (default 200), BENCH_KEEP_DB=1 (leave the scratch database for EXPLAIN work).
 */

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const RUNS = Math.max(1, Math.floor(ROWS / 10));
const P95_TARGET_MS = 50;
const DEEP_PAGE_FACTOR = 3;
const PAGE = 50;

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const time = (fn: (i: number) => Promise<unknown>, iterations = ITERATIONS): Promise<Stats> => timeN(fn, iterations);

async function main(): Promise<number> {
  let embedded: EmbeddedPostgres | undefined;
  const serverUrl = process.env.DATABASE_URL ?? (embedded = await startEmbeddedPostgres(join(projectRoot(), `.tmp/pg-bench-${process.pid}`), { persistent: false, fast: false })).url;
  const dbName = `tg_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  const dbUrl = url.toString();
  const results: Record<string, unknown> = { rows: ROWS, orgs: ORGS, runs: RUNS, iterations: ITERATIONS, startedAt: new Date().toISOString() };
  let ds: DataSource | undefined;
  let app: Awaited<ReturnType<typeof createGateway>>['app'] | undefined;
  try {
    // Seed on the initial schema, then apply the later migrations (the ledger indexes among them) to the
    // populated table, as a deploy to an existing database would.
    const noTimeout = (o: ReturnType<typeof dbOptions>): ReturnType<typeof dbOptions> => ({ ...o, extra: { ...(o.extra as object), statement_timeout: 0 } });
    const ds0 = await new DataSource({ ...noTimeout(dbOptions(dbUrl, 2)), migrations: [InitialSchema1764500000000] }).initialize();
    await runMigrations(ds0);
    log(`seeding ${ROWS} tool calls, ${2 * ROWS} events across ${ORGS} orgs...`);
    let t0 = performance.now();
    await seed(ds0, ROWS, RUNS, log);
    results.seedSeconds = Math.round((performance.now() - t0) / 100) / 10;
    await ds0.destroy();
    log(`  seeded in ${String(results.seedSeconds)} s`);
    ds = await new DataSource(noTimeout(dbOptions(dbUrl, 8))).initialize();
    t0 = performance.now();
    await runMigrations(ds);
    results.migrateSeconds = Math.round((performance.now() - t0) / 100) / 10;
    await ds.query('VACUUM ANALYZE');
    log(`  remaining migrations (indexes) in ${String(results.migrateSeconds)} s; analyzed`);
    results.tableSizes = await ds.query(
      `SELECT relname AS table, pg_size_pretty(pg_total_relation_size(oid)) AS total, pg_size_pretty(pg_indexes_size(oid)) AS indexes
         FROM pg_class WHERE relname IN ('tool_calls', 'runtime_ledger_events') ORDER BY relname`,
    );

    const big = ((await ds.query(`SELECT ${orgIdSql('0')} AS id`)) as { id: string }[])[0].id;
    const smallOrgs = ((await ds.query(`SELECT ${orgIdSql('o')} AS id FROM generate_series(1, ${ORGS - 1}) o`)) as { id: string }[]).map((r) => r.id);
    const bigRuns = ((await ds.query(`SELECT id FROM agent_runs WHERE org_id = $1 ORDER BY id LIMIT 200`, [big])) as { id: string }[]).map((r) => r.id);
    const sample = (await ds.query(`SELECT id, org_id, correlation_id FROM tool_calls TABLESAMPLE SYSTEM (1) LIMIT 200`)) as { id: string; org_id: string; correlation_id: string }[];
    const daysAgo = async (days: number): Promise<string> =>
      ((await ds!.query(`SELECT to_char((now() - $1 * interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS t`, [days])) as { t: string }[])[0].t;
    const mid = await daysAgo(15);
    const dayAfterMid = await daysAgo(14);
    const weekAgo = await daysAgo(7);

    /** The keyset position after `offset` rows of a listing (set-up only, not timed). */
    const positionAfter = async (orgId: string | null, f: ToolCallFilters, offset: number): Promise<CursorPosition> => {
      const { sql, params } = toolCallsPageSql(orgId, f, undefined, offset);
      const rows = (await ds!.query(`SELECT * FROM (${sql}) s ORDER BY created_at ASC, id ASC LIMIT 1`, params)) as ToolCallRow[];
      return { createdIso: rows[0].created_iso, key: rows[0].id };
    };

    const listQueries: [name: string, orgOf: (i: number) => string | null, f: (i: number) => ToolCallFilters, after?: CursorPosition][] = [
      ['list: org, first page', () => big, () => ({})],
      ['list: small orgs (rotating), first page', (i) => smallOrgs[i % smallOrgs.length], () => ({})],
      ['list: status=failed', () => big, () => ({ status: 'failed' })],
      ['list: status=indeterminate (1%)', () => big, () => ({ status: 'indeterminate' })],
      ['list: small orgs, status=indeterminate', (i) => smallOrgs[i % smallOrgs.length], () => ({ status: 'indeterminate' })],
      ['list: toolName', () => big, () => ({ toolName: 'amazon_query' })],
      ['list: toolName+action', () => big, () => ({ toolName: 'amazon_query', action: 'get_order' })],
      ['list: action alone', () => big, () => ({ action: 'create' })],
      ['list: errorCode', () => big, () => ({ errorCode: 'VENDOR_TIMEOUT' })],
      ['list: runId', () => big, (i) => ({ runId: bigRuns[i % bigRuns.length] })],
      ['list: correlationId', (i) => sample[i % sample.length].org_id, (i) => ({ correlationId: sample[i % sample.length].correlation_id })],
      ['list: since+until (1 day)', () => big, () => ({ since: mid, until: dayAfterMid })],
      ['list: status+toolName+since', () => big, () => ({ status: 'failed', toolName: 'shopify_refund', since: weekAgo })],
      ['list: toolName, rare (1% of calls)', () => big, () => ({ toolName: 'shopify_refund' })],
      ['list: toolName+action, rare (0.5%)', () => big, () => ({ toolName: 'nango_proxy', action: 'post' })],
      ['list: errorCode+toolName+until', () => big, () => ({ errorCode: 'CIRCUIT_OPEN', toolName: 'kyc', until: mid })],
      ['list: status+action+runId', () => big, (i) => ({ status: 'succeeded', action: 'lookup', runId: bigRuns[i % bigRuns.length] })],
      ['list: all orgs (platform), first page', () => null, () => ({})],
      ['list: all orgs, status=indeterminate', () => null, () => ({ status: 'indeterminate' })],
      ['list: all orgs, correlationId', () => null, (i) => ({ correlationId: sample[i % sample.length].correlation_id })],
      ['list: all orgs, errorCode', () => null, () => ({ errorCode: 'CREDENTIALS_NOT_FOUND' })],
    ];
    const deepQueries: typeof listQueries = [
      ['deep page: org, after 10,000 rows', () => big, () => ({}), await positionAfter(big, {}, 10_000)],
      ['deep page: org, after 100,000 rows', () => big, () => ({}), await positionAfter(big, {}, Math.min(100_000, Math.floor(ROWS * 0.3) - 100))],
      ['deep page: status=succeeded, after 10,000 rows', () => big, () => ({ status: 'succeeded' }), await positionAfter(big, { status: 'succeeded' }, 10_000)],
      ['deep page: toolName, after 10,000 rows', () => big, () => ({ toolName: 'amazon_query' }), await positionAfter(big, { toolName: 'amazon_query' }, 10_000)],
      ['deep page: rare toolName, after 1,000 rows', () => big, () => ({ toolName: 'shopify_refund' }), await positionAfter(big, { toolName: 'shopify_refund' }, 1_000)],
      ['deep page: all orgs, after 10,000 rows', () => null, () => ({}), await positionAfter(null, {}, 10_000)],
      ['deep page: all orgs, after 500,000 rows', () => null, () => ({}), await positionAfter(null, {}, Math.floor(ROWS / 2))],
    ];

    const sqlResults: Record<string, QueryResult> = {};
    const measureSql = async (name: string, build: (i: number) => { sql: string; params: unknown[] }): Promise<void> => {
      const plan = await explain(ds!, build(0).sql, build(0).params);
      const s = await time((i) => {
        const { sql, params } = build(i);
        return ds!.query(sql, params);
      });
      sqlResults[name] = { ...s, plan: plan.plan, explainMs: plan.executionMs, buffers: plan.buffers };
      log(`  ${name.padEnd(48)} p50 ${s.p50.toFixed(2).padStart(7)}  p95 ${s.p95.toFixed(2).padStart(7)}  p99 ${s.p99.toFixed(2).padStart(7)} ms   ${plan.plan}`);
    };

    log(`\nSQL, as the service runs it (${ITERATIONS} iterations each, page of ${PAGE} + 1):`);
    for (const [name, orgOf, f, after] of [...listQueries, ...deepQueries]) {
      await measureSql(name, (i) => toolCallsPageSql(orgOf(i), f(i), after, PAGE + 1));
    }
    // The detail view: the row, then its events, policy decision and approval (as ToolCallsQueryService.get).
    {
      const name = 'detail: row + events + decision + approval';
      const withApproval = (await ds.query(`SELECT id, org_id FROM tool_calls WHERE status = 'waiting_approval' LIMIT 100`)) as { id: string; org_id: string }[];
      const ids = [...sample.slice(0, 100), ...withApproval];
      const plan = await explain(ds, toolCallByIdSql(ids[0].org_id, ids[0].id).sql, toolCallByIdSql(ids[0].org_id, ids[0].id).params);
      const s = await time(async (i) => {
        const { sql, params } = toolCallByIdSql(ids[i % ids.length].org_id, ids[i % ids.length].id);
        const [row] = (await ds!.query(sql, params)) as ToolCallRow[];
        return loadToolCallStory(ds!, row.org_id, row.id, row.policy_decision_id);
      });
      const story = await explain(ds, `SELECT * FROM runtime_ledger_events WHERE tool_call_id = $1::uuid AND org_id = $2::uuid ORDER BY seq`, [ids[0].id, ids[0].org_id]);
      sqlResults[name] = { ...s, plan: `${plan.plan}; events: ${story.plan}` };
      log(`  ${name.padEnd(48)} p50 ${s.p50.toFixed(2).padStart(7)}  p95 ${s.p95.toFixed(2).padStart(7)}  p99 ${s.p99.toFixed(2).padStart(7)} ms   ${plan.plan}; events: ${story.plan}`);
    }
    const eventPos = ((await ds.query(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS t, seq FROM runtime_ledger_events WHERE org_id = $1
        ORDER BY created_at DESC, seq DESC OFFSET 10000 LIMIT 1`,
      [big],
    )) as { t: string; seq: string }[])[0];
    await measureSql('events: org, first page', () => ledgerEventsPageSql(big, {}, undefined, PAGE + 1));
    await measureSql('events: runId', (i) => ledgerEventsPageSql(big, { runId: bigRuns[i % bigRuns.length] }, undefined, PAGE + 1));
    await measureSql('events: type', () => ledgerEventsPageSql(big, { type: 'tool_call.indeterminate' }, undefined, PAGE + 1));
    await measureSql('events: deep page after 10,000', () => ledgerEventsPageSql(big, {}, { createdIso: eventPos.t, key: eventPos.seq }, PAGE + 1));
    await measureSql('events: all orgs, first page', () => ledgerEventsPageSql(null, {}, undefined, PAGE + 1));
    results.sql = sqlResults;

    // Over HTTP: the real app (auth, validation, cursor signing, JSON) on the same database.
    log(`\nHTTP, the real app (${ITERATIONS} iterations each):`);
    const adminKey = `tgw_bench_${randomBytes(24).toString('base64url')}`;
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: dbUrl,
      MASTER_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      BOOTSTRAP_ADMIN_KEY: adminKey,
      RATE_LIMIT_RPS: '0',
      LOG_LEVEL: 'silent',
      DATA_DIR: join(projectRoot(), '.tmp/bench-data'),
    });
    app = (await createGateway(config)).app;
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    const keyRes = await fetch(`${base}/v1/api-keys`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ orgId: big, role: 'ops', name: 'bench ops' }),
    });
    if (keyRes.status !== 201) throw new Error(`creating the bench ops key: ${keyRes.status} ${await keyRes.text()}`);
    const opsKey = ((await keyRes.json()) as { key: string }).key;
    const get = async (path: string): Promise<unknown> => {
      const res = await fetch(`${base}${path}`, { headers: { Authorization: `Bearer ${opsKey}` } });
      const body = (await res.json()) as unknown;
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
      return body;
    };
    let cursor: string | null = null;
    for (let n = 0; n < 10_000; n += 200) {
      cursor = ((await get(`/v1/tool-calls?limit=200${cursor ? `&cursor=${cursor}` : ''}`)) as { nextCursor: string }).nextCursor;
    }
    const http: Record<string, Stats> = {};
    const httpCases: [string, (i: number) => string][] = [
      ['GET /v1/tool-calls (first page)', () => '/v1/tool-calls'],
      ['GET /v1/tool-calls?status&toolName&since', () => `/v1/tool-calls?status=failed&toolName=shopify_refund&since=${encodeURIComponent(weekAgo)}`],
      ['GET /v1/tool-calls?errorCode', () => '/v1/tool-calls?errorCode=VENDOR_TIMEOUT'],
      ['GET /v1/tool-calls?runId', (i) => `/v1/tool-calls?runId=${bigRuns[i % bigRuns.length]}`],
      ['GET /v1/tool-calls (page after 10,000 rows)', () => `/v1/tool-calls?cursor=${cursor!}`],
      ['GET /v1/tool-calls/:id', (i) => `/v1/tool-calls/${sample.filter((s) => s.org_id === big)[i % sample.filter((s) => s.org_id === big).length].id}`],
      ['GET /v1/ledger/events (first page)', () => '/v1/ledger/events'],
    ];
    for (const [name, path] of httpCases) {
      http[name] = await time((i) => get(path(i)));
      log(`  ${name.padEnd(48)} p50 ${http[name].p50.toFixed(2).padStart(7)}  p95 ${http[name].p95.toFixed(2).padStart(7)}  p99 ${http[name].p99.toFixed(2).padStart(7)} ms`);
    }
    results.http = http;
    const usage = await time(() => get(`/v1/orgs/${big}/usage`), 20);
    results.usageBigOrg = usage;
    log(`  ${'GET /v1/orgs/:orgId/usage (30% org, all time)'.padEnd(48)} p50 ${usage.p50.toFixed(2).padStart(7)}  p95 ${usage.p95.toFixed(2).padStart(7)} ms (20 iterations; not part of the target)`);

    // The verdict: every list, detail and deep-page query under the target, and depth costing nothing.
    const measured = Object.entries(sqlResults).map(([name, s]) => ({ name, p95: s.p95 }));
    const httpMeasured = Object.entries(http).map(([name, s]) => ({ name, p95: s.p95 }));
    const over = [...measured, ...httpMeasured].filter((m) => m.p95 >= P95_TARGET_MS);
    const firstP95 = sqlResults['list: org, first page'].p95;
    const deepRatios = Object.fromEntries(
      Object.entries(sqlResults)
        .filter(([n]) => n.startsWith('deep page'))
        .map(([n, s]) => [n, Math.round((s.p95 / Math.max(firstP95, 0.05)) * 100) / 100]),
    );
    const deepOk = Object.values(deepRatios).every((r) => r <= DEEP_PAGE_FACTOR);
    const httpDeepRatio = Math.round((http['GET /v1/tool-calls (page after 10,000 rows)'].p95 / http['GET /v1/tool-calls (first page)'].p95) * 100) / 100;
    results.verdict = { p95TargetMs: P95_TARGET_MS, allUnderTarget: over.length === 0, over, deepPageP95OverFirstPageP95: deepRatios, httpDeepRatio, deepPageFactorLimit: DEEP_PAGE_FACTOR, deepOk: deepOk && httpDeepRatio <= DEEP_PAGE_FACTOR };
    log(`\np95 < ${P95_TARGET_MS} ms for every query: ${over.length === 0 ? 'yes' : `NO (${over.map((o) => o.name).join(', ')})`}`);
    log(`deep page p95 / first page p95: ${JSON.stringify(deepRatios)}; HTTP ${httpDeepRatio} (limit ${DEEP_PAGE_FACTOR}x): ${deepOk && httpDeepRatio <= DEEP_PAGE_FACTOR ? 'ok' : 'NO'}`);
    const dir = join(projectRoot(), 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'ledger.json'), JSON.stringify({ ...results, finishedAt: new Date().toISOString() }, null, 2) + '\n');
    log(`results: ${join(dir, 'ledger.json')}`);
    return over.length === 0 && deepOk ? 0 : 1;
  } finally {
    await app?.close();
    await ds?.destroy();
    if (process.env.BENCH_KEEP_DB !== '1') await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    else log(`kept database ${dbUrl}`);
    await admin.end();
    await embedded?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(2);
  },
);
