import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { canonicalNangoPath, checkNangoPath, checkNangoQuery, NANGO_PATH_MAX, QUERY_MAX_KEYS, QUERY_NAME_MAX, QUERY_VALUE_MAX } from './nango-path.js';
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

describe('nango_proxy path length: the definition and the checks agree', () => {
  const postAction = NANGO_TOOLS[0]!.actions.find((a) => a.name === 'post')!;
  const validatePost = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true }).compile(postAction.inputSchema);

  /**
   * What the gateway decides: it spells a valid path canonically (leading "/" added) before the catalog checks
   * the definition's schema, then the checks run again on what the schema saw (ToolCatalogService.checkParams).
   */
  const pipelineAccepts = (validate: (params: unknown) => boolean, params: (path: string) => Record<string, unknown>, path: string): boolean => {
    const seen = checkNangoPath(path) === null ? canonicalNangoPath(path) : path;
    return validate(params(seen)) && checkNangoPath(seen) === null;
  };

  const lengths = [1, 2, NANGO_PATH_MAX - 1, NANGO_PATH_MAX, NANGO_PATH_MAX + 1, NANGO_PATH_MAX + 2];
  it.each(lengths.flatMap((n) => [[n, false] as const, [n, true] as const]))('%i characters after the path\'s start (leading "/": %s)', (n, slash) => {
    const relative = 'a'.repeat(n);
    const path = slash ? `/${relative}` : relative;
    const allowed = n <= NANGO_PATH_MAX;
    expect(checkNangoPath(path) === null).toBe(allowed);
    expect(pipelineAccepts(validate, (p) => ({ path: p }), path)).toBe(allowed);
    expect(pipelineAccepts(validatePost, (p) => ({ path: p, body: {} }), path)).toBe(allowed);
    // The definition alone, on the canonical form it is checked against, draws the same line.
    expect(validate({ path: `/${relative}` })).toBe(allowed);
  });
});

describe('nango_proxy path: what the definition tells the model to send, the checks take', () => {
  const description = (getAction.inputSchema as { properties: { path: { description: string } } }).properties.path.description;

  it.each([
    ['@', '/v1/users/jane%40example.com'],
    [';', '/v1/notes/a%3Bb'],
    ['?', '/v1/search/what%3F'],
    ['#', '/v1/tags/%23urgent'],
    ['{', '/v1/things/%7Bid%7D'],
  ])('%s is named as not allowed in any form, and its percent-encoded form is refused', (ch, path) => {
    const [refusedList] = /not allowed in any form[^:]*: [^(]*/.exec(description) ?? [''];
    expect(refusedList).toContain(ch);
    expect(checkNangoPath(path)).not.toBeNull();
  });

  it('a space and a non-ASCII letter, percent-encoded as it says, are taken', () => {
    expect(description).toMatch(/other characters \(a space, a non-ASCII letter\) percent-encoded as UTF-8/);
    expect(checkNangoPath('/v1/people/Jos%C3%A9%20Garc%C3%ADa')).toBeNull();
  });
});
