import type { CatalogEntry } from '../catalog/tool-catalog.service.js';

export type ToolFormat = 'anthropic' | 'openai';

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
        for (const [k, v] of Object.entries(props)) if (!(k in properties)) properties[k] = v;
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

/** " (requires orderId, amount)" for an action's required params, "" when it has none. */
function needs(e: CatalogEntry): string {
  const required = Array.isArray(e.action.inputSchema.required) ? (e.action.inputSchema.required as string[]) : [];
  return required.length === 0 ? '' : ` (requires ${required.join(', ')})`;
}

export function formatTools(tools: ModelTool[], format: ToolFormat): unknown[] {
  return format === 'openai'
    ? tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.schema } }))
    : tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema }));
}
