import type { DataSource } from 'typeorm';

const PG_TYPES: Record<string, string> = {
  uuid: 'uuid',
  text: 'text',
  boolean: 'boolean',
  integer: 'integer',
  bigint: 'bigint',
  jsonb: 'jsonb',
  timestamptz: 'timestamp with time zone',
  bytea: 'bytea',
};

/**
 * Every unique index and primary key the migrations build, by name, as `table (columns) [WHERE predicate]`
 * (pg_get_indexdef without the index's name, schema and access method): what the code's ON CONFLICT and its "the same
 * call once" rules rely on, and no entity declares. Without tool_calls_run_tool_use_uq, for one, a tool_use sent again
 * under another key ran twice at the vendor. `migration:check` fails when a migration adds or drops one and this list
 * is not changed with it.
 */
export const UNIQUE_KEYS: Readonly<Record<string, string>> = {
  agent_runs_pkey: 'agent_runs (id)',
  api_keys_pkey: 'api_keys (id)',
  api_keys_hash_uq: 'api_keys (key_hash)',
  approval_requests_pkey: 'approval_requests (id)',
  approval_requests_tool_call_id_key: 'approval_requests (tool_call_id)',
  feature_flags_pkey: 'feature_flags (org_id, flag)',
  integration_credentials_pkey: 'integration_credentials (org_id, integration_type)',
  orgs_pkey: 'orgs (id)',
  policies_pkey: 'policies (org_id)',
  policy_decisions_pkey: 'policy_decisions (id)',
  runtime_ledger_events_id_key: 'runtime_ledger_events (id)',
  ledger_events_chain_uq: 'runtime_ledger_events (org_id, chain_seq)',
  runtime_ledger_events_pkey: 'runtime_ledger_events (seq)',
  shopify_refund_leases_pkey: 'shopify_refund_leases (shop_domain, order_id)',
  tool_call_inputs_pkey: 'tool_call_inputs (tool_call_id)',
  tool_call_results_pkey: 'tool_call_results (tool_call_id)',
  tool_calls_pkey: 'tool_calls (id)',
  tool_calls_idem_uq: 'tool_calls (org_id, idempotency_key)',
  tool_calls_run_tool_use_uq: 'tool_calls (run_id, tool_use_id) WHERE tool_use_unique',
  tool_permissions_pkey: 'tool_permissions (id)',
  tool_permissions_uq: "tool_permissions (org_id, tool_name, action, COALESCE(specialist_id, ''::text))",
  vendor_tokens_pkey: 'vendor_tokens (org_id, integration_type)',
};

/** An object the migrations build that no entity maps, and the code relies on. */
export type RequiredObject =
  | { kind: 'function'; name: string; why: string } // name: its signature, `name(argument types)`
  | { kind: 'trigger'; name: string; table: string; why: string }
  | { kind: 'table'; name: string; why: string };

/**
 * What the migrations build outside the entities (and UNIQUE_KEYS) that the code relies on: functions, triggers, and
 * tables the code reads and writes by raw SQL. Looked for in both scopes, so a `down` run by hand (its row left in
 * typeorm_migrations) stops start-up here as a missing column does: without ledger_seq_ceiling() the sealer never
 * seals; without the guard the ledger is editable while verify says ok. `migration:check` fails when a migration adds
 * or drops one (a function of the schema, a trigger, a table no entity maps) and this list is not changed with it.
 */
export const REQUIRED_OBJECTS: readonly RequiredObject[] = [
  { kind: 'function', name: 'ledger_events_guard()', why: 'the ledger append-only guard, InitialSchema1764500000000' },
  { kind: 'trigger', name: 'ledger_events_no_update', table: 'runtime_ledger_events', why: 'the ledger append-only guard, InitialSchema1764500000000' },
  { kind: 'trigger', name: 'ledger_events_no_truncate', table: 'runtime_ledger_events', why: 'the ledger append-only guard, InitialSchema1764500000000' },
  { kind: 'table', name: 'vendor_tokens', why: 'VendorTokens1764900000000' },
  { kind: 'table', name: 'shopify_refund_leases', why: 'ShopifyRefundLeases1765000000000' },
  { kind: 'function', name: 'ledger_seq_ceiling()', why: "the ledger sealer's ceiling, LedgerSeqCeiling1765400000000" },
];

/** The name an object of REQUIRED_OBJECTS goes by in a problem: `function f()`, `trigger t on table`, `table t`. */
const objectLabel = (o: RequiredObject): string => (o.kind === 'trigger' ? `trigger ${o.name} on ${o.table}` : `${o.kind} ${o.name}`);

/**
 * REQUIRED_OBJECTS missing (or, a trigger, disabled) in the current schema, one line each, in one query. From the
 * catalogs and name lookups alone (to_regprocedure, to_regclass take no lock on what they find).
 */
async function requiredObjectProblems(ds: DataSource): Promise<string[]> {
  const rows = (await ds.query(
    `SELECT o.i, CASE o.kind
              WHEN 'function' THEN to_regprocedure(s.q || '.' || o.name) IS NOT NULL
              WHEN 'table' THEN EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = to_regclass(s.q || '.' || quote_ident(o.name)) AND c.relkind IN ('r', 'p'))
              ELSE EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = to_regclass(s.q || '.' || quote_ident(o.tbl)) AND t.tgname = o.name AND NOT t.tgisinternal)
            END AS present,
            o.kind <> 'trigger' OR EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = to_regclass(s.q || '.' || quote_ident(o.tbl)) AND t.tgname = o.name AND t.tgenabled <> 'D') AS enabled
       FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY o(kind, name, tbl, i), (SELECT quote_ident(current_schema()) AS q) s
      ORDER BY o.i`,
    [REQUIRED_OBJECTS.map((o) => o.kind), REQUIRED_OBJECTS.map((o) => o.name), REQUIRED_OBJECTS.map((o) => (o.kind === 'trigger' ? o.table : null))],
  )) as { i: string; present: boolean; enabled: boolean }[];
  const problems: string[] = [];
  for (const r of rows) {
    const o = REQUIRED_OBJECTS[Number(r.i) - 1]!;
    if (!r.present) problems.push(`${objectLabel(o)} (${o.why}) is missing in the database`);
    else if (!r.enabled) problems.push(`${objectLabel(o)} (${o.why}) is disabled in the database`);
  }
  return problems;
}

/**
 * migration:check's other direction: functions (not an extension's), triggers (not internal) and tables (neither an
 * entity's nor the migrations table) in the current schema that REQUIRED_OBJECTS does not list.
 */
async function unlistedObjectProblems(ds: DataSource, known: ReadonlySet<string>): Promise<string[]> {
  const rows = (await ds.query(
    `SELECT 'function' AS kind, p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS name, NULL AS "table"
       FROM pg_proc p
      WHERE p.pronamespace = to_regnamespace(quote_ident(current_schema()))
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
     UNION ALL
     SELECT 'trigger', t.tgname, c.relname
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE NOT t.tgisinternal AND c.relnamespace = to_regnamespace(quote_ident(current_schema()))
     UNION ALL
     SELECT 'table', c.relname, NULL
       FROM pg_class c
      WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relnamespace = to_regnamespace(quote_ident(current_schema()))
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`,
  )) as { kind: RequiredObject['kind']; name: string; table: string | null }[];
  const problems: string[] = [];
  for (const r of rows) {
    if (r.kind === 'table' && known.has(r.name)) continue;
    if (REQUIRED_OBJECTS.some((o) => o.kind === r.kind && o.name === r.name && (o.kind !== 'trigger' || o.table === r.table))) continue;
    if (r.kind === 'table') problems.push(`table ${r.name} exists in the database but neither an entity nor REQUIRED_OBJECTS (src/db/schema-check.ts) names it`);
    else problems.push(`${r.kind} ${r.name}${r.kind === 'trigger' ? ` on ${r.table}` : ''} exists in the database but is not in REQUIRED_OBJECTS (src/db/schema-check.ts)`);
  }
  return problems;
}

/**
 * `exact` (migration:check): the entities and the schema the migrations build match both ways, types and
 * nullability included, the unique keys are UNIQUE_KEYS, no more, no fewer, and the functions, triggers and tables no
 * entity maps are REQUIRED_OBJECTS, no more, no fewer.
 *
 * `needed` (every start-up, after migrating): only what this release's code needs is looked for — every mapped table
 * and column, every unique key, and every one of REQUIRED_OBJECTS (a trigger there and enabled). A database newer than the code (the release after this one migrated it, and this
 * one is its roll-back) has columns, tables and indexes this code does not know, and may have changed a type or
 * dropped a NOT NULL for the code that knows why: none of that stops this one.
 */
export type SchemaScope = 'exact' | 'needed';

/**
 * What differs between the entities (with UNIQUE_KEYS and REQUIRED_OBJECTS) and the database's current schema, one line each; [] when
 * nothing. typeorm_migrations records a migration as applied whatever happened to its work afterwards (a `down`
 * run by hand left its rows): start-up reads the schema itself, so it does not serve on one missing a column or an
 * index the code's answers depend on.
 */
export async function schemaDrift(ds: DataSource, scope: SchemaScope = 'exact'): Promise<string[]> {
  const exact = scope === 'exact';
  const problems: string[] = [];
  const cols = (await ds.query(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = current_schema()`,
  )) as { table_name: string; column_name: string; data_type: string; is_nullable: string }[];
  const byTable = new Map<string, Map<string, { type: string; nullable: boolean }>>();
  for (const c of cols) {
    if (!byTable.has(c.table_name)) byTable.set(c.table_name, new Map());
    byTable.get(c.table_name)!.set(c.column_name, { type: c.data_type, nullable: c.is_nullable === 'YES' });
  }
  for (const meta of ds.entityMetadatas) {
    const table = byTable.get(meta.tableName);
    if (!table) {
      problems.push(`table ${meta.tableName} (entity ${meta.name}) is missing in the database`);
      continue;
    }
    for (const col of meta.columns) {
      const db = table.get(col.databaseName);
      const want = PG_TYPES[String(col.type)] ?? String(col.type);
      if (!db) problems.push(`${meta.tableName}.${col.databaseName} is mapped but missing in the database`);
      else if (!exact) continue;
      else if (db.type !== want) problems.push(`${meta.tableName}.${col.databaseName}: entity type ${want}, database ${db.type}`);
      else if (db.nullable !== col.isNullable) problems.push(`${meta.tableName}.${col.databaseName}: nullability differs (entity ${col.isNullable})`);
    }
    if (!exact) continue;
    for (const name of table.keys()) {
      if (!meta.columns.some((c) => c.databaseName === name)) problems.push(`${meta.tableName}.${name} exists in the database but no entity maps it`);
    }
  }
  const migrationsTable = ds.options.migrationsTableName ?? 'migrations';
  problems.push(...(await requiredObjectProblems(ds)));
  if (exact) problems.push(...(await unlistedObjectProblems(ds, new Set([...ds.entityMetadatas.map((m) => m.tableName), migrationsTable]))));
  if (!exact) {
    // From the catalogs alone: pg_get_indexdef takes a lock on the table, and a start-up must not wait behind a session
    // holding one (a migration of another replica, a LOCK TABLE, a VACUUM FULL) just to read the schema. Found by name,
    // or by what the code's ON CONFLICT relies on (the table, its key columns in order, partial or not): a later
    // release that renamed an index has not taken it away, and this one, its roll-back, runs on that schema.
    const indexes = (await ds.query(
      `SELECT c.relname AS name, t.relname AS "table", i.indpred IS NOT NULL AS partial,
              ARRAY(SELECT COALESCE(a.attname::text, '(expression)') FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                      LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.ord) AS columns
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
        WHERE i.indisunique AND i.indisvalid AND c.relnamespace = to_regnamespace(quote_ident(current_schema()))`,
    )) as { name: string; table: string; partial: boolean; columns: string[] }[];
    for (const [name, key] of Object.entries(UNIQUE_KEYS)) {
      const shape = /^(\S+) \(([^()]*)\)( WHERE .+)?$/.exec(key); // null for an expression key: by name only
      const found = indexes.some(
        (ix) =>
          ix.name === name ||
          (shape !== null && ix.table === shape[1] && ix.partial === (shape[3] !== undefined) && ix.columns.join(', ') === shape[2]),
      );
      if (!found) problems.push(`unique index ${name} on ${key} is missing in the database`);
    }
    return problems;
  }
  const keys = (
    (await ds.query(
      `SELECT c.relname AS name, regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE UNIQUE INDEX \\S+ ON (\\S+\\.)?(\\S+) USING \\S+ ', '\\2 ') AS key
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indisunique AND t.relnamespace = to_regnamespace(quote_ident(current_schema())) AND t.relname <> $1`,
      [migrationsTable],
    )) as { name: string; key: string }[]
  );
  const found = new Map(keys.map((k) => [k.name, k.key]));
  for (const [name, key] of Object.entries(UNIQUE_KEYS)) {
    const there = found.get(name);
    if (there === undefined) problems.push(`unique index ${name} on ${key} is missing in the database`);
    else if (there !== key) problems.push(`unique index ${name} is ${there} in the database, ${key} in UNIQUE_KEYS (src/db/schema-check.ts)`);
  }
  for (const { name, key } of keys) if (!Object.hasOwn(UNIQUE_KEYS, name)) problems.push(`unique index ${name} on ${key} exists in the database but is not in UNIQUE_KEYS (src/db/schema-check.ts)`);
  return problems;
}
