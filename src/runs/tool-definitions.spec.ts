import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import type { ToolActionSpec, ToolSpec, VendorHandler } from '../vendors/vendor-handler.js';
import { buildModelTools, formatTools } from './tool-definitions.js';

const action = (name: string, properties: Record<string, unknown>, required: string[]): ToolActionSpec => ({
  name, description: `${name} it`, inputSchema: { type: 'object', properties, required }, riskLevel: 'low', sideEffect: 'read', idempotent: true, costCents: 0,
});
const PATH = { type: 'string', description: 'the provider path' };
const QUERY = { type: 'object', description: 'query parameters' };
const BODY = { type: 'object' };
const tool: ToolSpec = { name: 'proxy', vendor: 'nango', description: 'A proxy.', actions: [action('get', { path: PATH, query: QUERY }, ['path']), action('post', { path: PATH, body: BODY }, ['path', 'body'])] };
const entries: CatalogEntry[] = tool.actions.map((a) => ({ tool, action: a, vendor: 'nango', handler: {} as VendorHandler, key: `proxy.${a.name}` }));

describe('buildModelTools', () => {
  it('one tool, the union of its actions\' params; a param only some actions take says which (the schema cannot)', () => {
    const [built] = buildModelTools(entries);
    expect(built.schema).toEqual({
      type: 'object',
      properties: {
        action: { type: 'string', enum: ['get', 'post'], description: 'which action of this tool to run' },
        path: PATH,
        query: { ...QUERY, description: 'query parameters (only for action get)' },
        body: { type: 'object', description: 'only for action post' },
      },
      required: ['action'],
    });
    expect(built.description).toBe('A proxy. Actions — get (requires path): get it post (requires path, body): post it');
    // The catalog's own schemas are not changed.
    expect(QUERY).toEqual({ type: 'object', description: 'query parameters' });
  });

  it('a tool of one action shows its params as declared', () => {
    const [built] = buildModelTools(entries.slice(0, 1));
    expect(built.schema.properties).toEqual({ action: { type: 'string', enum: ['get'], description: 'which action of this tool to run' }, path: PATH, query: QUERY });
  });
});

describe('formatTools', () => {
  const tools = buildModelTools(entries);
  it('anthropic, openai (Chat Completions) and openai-responses (flat), both OpenAI shapes strict: false', () => {
    const [t] = tools;
    expect(formatTools(tools, 'anthropic')).toEqual([{ name: 'proxy', description: t.description, input_schema: t.schema }]);
    expect(formatTools(tools, 'openai')).toEqual([{ type: 'function', function: { name: 'proxy', description: t.description, parameters: t.schema, strict: false } }]);
    expect(formatTools(tools, 'openai-responses')).toEqual([{ type: 'function', name: 'proxy', description: t.description, parameters: t.schema, strict: false }]);
  });
});
