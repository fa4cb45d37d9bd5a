import { canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { isRecord } from '../policy/policy-equality.js';

/** `v[key]` when both are JSON objects (the run's metadata as stored may be of another shape). */
export const objectAt = (v: unknown, key: string): Record<string, unknown> | undefined => (isRecord(v) && isRecord(v[key]) ? v[key] : undefined);

/**
 * The run's manifest as stored. The column is jsonb the gateway writes, but a row of another shape (an operator's
 * edit, a restore) must fail closed, not answer 500 on every read and call of the run: what is not a list of strings
 * allows nothing.
 */
export function manifestTools(metadata: unknown): string[] {
  const list = objectAt(metadata, 'runtimeManifest')?.allowedTools;
  return Array.isArray(list) ? list.filter((t): t is string => typeof t === 'string') : [];
}

/**
 * What the run.created event records of the manifest (`manifestDigest`): the lowercase hex SHA-256 of the canonical
 * JSON of its allowed tools, in their order, as `GET /v1/runs/:id` shows them (`manifest.allowedTools`), so anyone can
 * recompute it; ledger verify holds the run row to it (src/ledger/run-check.ts).
 */
export const manifestDigest = (tools: readonly string[]): string => sha256Hex(canonicalJson(tools));
