import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { checkNangoQuery, QUERY_MAX_KEYS, QUERY_NAME_MAX, QUERY_VALUE_MAX } from './nango-path.js';
import { NANGO_TOOLS } from './nango.tools.js';

// The tool definition is what the model is told; the query checks are what the gateway then enforces.
// A query the definition allows must not be refused after, nor one it refuses be let through.
const getAction = NANGO_TOOLS[0]!.actions.find((a) => a.name === 'get')!;
const validate = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true }).compile(getAction.inputSchema);

const queries: [string, Record<string, unknown>][] = [
  ['a value of the longest length', { q: 'x'.repeat(QUERY_VALUE_MAX) }],
  ['a value one longer', { q: 'x'.repeat(QUERY_VALUE_MAX + 1) }],
  ['a name of the longest length', { ['n'.repeat(QUERY_NAME_MAX)]: '1' }],
  ['a name one longer', { ['n'.repeat(QUERY_NAME_MAX + 1)]: '1' }],
  ['an empty name', { '': '1' }],
  ['as many parameters as allowed', Object.fromEntries(Array.from({ length: QUERY_MAX_KEYS }, (_, i) => [`p${i}`, i]))],
  ['one parameter more', Object.fromEntries(Array.from({ length: QUERY_MAX_KEYS + 1 }, (_, i) => [`p${i}`, i]))],
  ['numbers and booleans', { limit: 5, dryRun: false }],
  // JSON Schema counts characters (code points), not UTF-16 units: an emoji is one.
  ['a value of the longest length in emoji', { q: '😀'.repeat(QUERY_VALUE_MAX) }],
  ['a value one longer in emoji', { q: '😀'.repeat(QUERY_VALUE_MAX + 1) }],
  ['a name of the longest length in emoji', { ['😀'.repeat(QUERY_NAME_MAX)]: '1' }],
  ['a name one longer in emoji', { ['😀'.repeat(QUERY_NAME_MAX + 1)]: '1' }],
];

describe('nango_proxy.get query: the definition and the checks agree', () => {
  it.each(queries)('%s', (_label, query) => {
    const allowedByDefinition = validate({ path: '/v1/customers', query });
    const allowedByChecks = checkNangoQuery(query) === null;
    expect(allowedByDefinition).toBe(allowedByChecks);
  });

  it('still refuses what only the checks know (control characters in a name)', () => {
    const query = { 'a\u0001b': '1' };
    expect(validate({ path: '/v1/customers', query })).toBe(true);
    expect(checkNangoQuery(query)).toMatch(/parameter names/);
  });
});
