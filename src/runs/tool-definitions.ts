import type { CatalogEntry } from '../catalog/tool-catalog.service.js';

/** The shapes GET /v1/runs/:runId/tools answers in (runs.dto.ts TOOL_FORMATS). */
export const TOOL_FORMATS = ['anthropic', 'openai', 'openai-responses'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

interface ModelTool {
  name: string;
  description: string;
  schema: Record<string, unknown>;
}

/**
 * Model-ready tool definitions for exactly the permitted actions: one tool per
 * toolName, `action` as an enum, plus the union of those actions' params. The
 * gateway still enforces each action's own schema (422 naming the field).
 */
export function buildModelTools(entries: CatalogEntry[]): ModelTool[] {
  const byTool = new Map<string, CatalogEntry[]>();
  for (const e of entries) byTool.set(e.tool.name, [...(byTool.get(e.tool.name) ?? []), e]);
  return [...byTool.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, list]) => {
      const properties: Record<string, unknown> = {
        action: { type: 'string', enum: list.map((e) => e.action.name), description: 'which action of this tool to run' },
      };
      for (const e of list) {
        const props = (e.action.inputSchema.properties ?? {}) as Record<string, unknown>;
        for (const [k, v] of Object.entries(props)) if (!Object.hasOwn(properties, k)) properties[k] = onlyFor(k, v, list);
      }
      // The tool's schema can only require `action` (one schema for all its actions): what each action needs besides is
      // said here, so a model is not left to learn it from a 422.
      const actions = list.map((e) => `${e.action.name}${needs(e)}: ${e.action.description}`).join(' ');
      return {
        name,
        description: `${list[0].tool.description} Actions — ${actions}`,
        schema: { type: 'object', properties, required: ['action'] },
      };
    });
}

/**
 * A param of the union that not every action of the tool takes, its description saying which do ("only for action
 * get"): the one schema cannot say it, and a model sending nango_proxy's `query` with `post` was refused with a 422.
 */
function onlyFor(param: string, schema: unknown, list: CatalogEntry[]): unknown {
  const takers = list.filter((e) => Object.hasOwn((e.action.inputSchema.properties ?? {}) as object, param)).map((e) => e.action.name);
  if (takers.length === list.length || typeof schema !== 'object' || schema === null) return schema;
  const described = schema as { description?: unknown };
  const only = `only for action ${takers.join(' or ')}`;
  return { ...described, description: typeof described.description === 'string' ? `${described.description} (${only})` : only };
}

/** " (requires orderId, amount)" for an action's required params, "" when it has none. */
function needs(e: CatalogEntry): string {
  const required = Array.isArray(e.action.inputSchema.required) ? (e.action.inputSchema.required as string[]) : [];
  return required.length === 0 ? '' : ` (requires ${required.join(', ')})`;
}

/**
 * `anthropic`: Messages API tools. `openai`: Chat Completions tools. `openai-responses`: the Responses API's flat
 * function tools. Both OpenAI shapes say `strict: false`: the one schema per tool (optional params, the union of its
 * actions') is not a strict-mode schema, and the Responses API takes a function with no `strict` as strict and
 * refuses it.
 */
export function formatTools(tools: ModelTool[], format: ToolFormat): unknown[] {
  switch (format) {
    case 'openai':
      return tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.schema, strict: false } }));
    case 'openai-responses':
      return tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.schema, strict: false }));
    case 'anthropic':
      return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema }));
  }
}
