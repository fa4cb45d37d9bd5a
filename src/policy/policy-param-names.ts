/** The part of a catalog tool read here (ToolSpec has it). */
export interface ToolParams {
  name: string;
  actions: readonly { name: string; inputSchema: Record<string, unknown> }[];
}

/**
 * The top-level params a rule's `where` path can start with. `open` when some action matched takes params its
 * schema does not list (no `additionalProperties: false`): then any name may be one.
 */
export interface ParamNames {
  readonly names: ReadonlySet<string>;
  readonly open: boolean;
}

/** By a rule's match.toolName: "tool.action", "tool.*", or undefined (every action); undefined when it names nothing. */
export type ParamNamesOf = (toolName: string | undefined) => ParamNames | undefined;

/**
 * Built once from the catalog, so checking a policy of hundreds of rules is a set lookup per condition.
 * The engine resolves a path against the call's params only, and those have passed the action's schema.
 */
export function paramNamesIndex(tools: readonly ToolParams[]): ParamNamesOf {
  const byAction = new Map<string, ParamNames>();
  const byTool = new Map<string, ParamNames>();
  let every: ParamNames = { names: new Set(), open: false };
  for (const tool of tools) {
    for (const action of tool.actions) {
      const own = paramNamesOf(action.inputSchema);
      byAction.set(`${tool.name}.${action.name}`, own);
      byTool.set(tool.name, union(byTool.get(tool.name), own));
      every = union(every, own);
    }
  }
  return (toolName) => {
    if (toolName === undefined) return every;
    return toolName.endsWith('.*') ? byTool.get(toolName.slice(0, -2)) : byAction.get(toolName);
  };
}

function paramNamesOf(schema: Record<string, unknown>): ParamNames {
  const properties = schema.properties;
  const listed = typeof properties === 'object' && properties !== null ? Object.keys(properties) : [];
  return { names: new Set(listed), open: schema.additionalProperties !== false };
}

function union(a: ParamNames | undefined, b: ParamNames): ParamNames {
  if (a === undefined) return b;
  return { names: new Set([...a.names, ...b.names]), open: a.open || b.open };
}
