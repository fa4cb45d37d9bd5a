import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LEDGER_EVENT_TYPES } from './ledger-event-types.js';

/** Every .ts file under src/, specs aside. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') ? [path] : [];
  });
}

describe('LEDGER_EVENT_TYPES', () => {
  it('holds every event type written in src/ (a type missing from it could not be filtered on), and only those', () => {
    const prefixes = '(?:org|feature_flag|tool_permissions|policy|credentials|api_key|run|tool_call)';
    const written = new Set<string>();
    for (const file of sources('src')) {
      if (file.endsWith('ledger-event-types.ts')) continue;
      for (const m of readFileSync(file, 'utf8').matchAll(new RegExp(`'(${prefixes}\\.[a-z_]+)'`, 'g'))) written.add(m[1]);
    }
    expect([...written].sort()).toEqual([...LEDGER_EVENT_TYPES].sort());
  });
});
