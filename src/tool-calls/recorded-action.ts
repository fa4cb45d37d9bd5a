import { recordedModelText } from '../catalog/model-text.js';
import type { ToolCatalogService } from '../catalog/tool-catalog.service.js';

/** Longest recorded action: what the ops `action` filter accepts (1..200), far below the btree row limit of tool_calls_org_action_idx. */
export const RECORDED_ACTION_MAX = 200;

/**
 * `input.action` as the ledger records it, in tool_calls.action and in the
 * metadata of every event of the call (one value for both).
 *
 * - An action of that tool in the catalog is recorded verbatim.
 * - Anything else is the model's free text, which may be huge (an index row
 *   too big for tool_calls_org_action_idx, a 200 KB copy in each event) or
 *   carry a secret ("card 4111… Bearer sk_live_…") or a customer's email or
 *   phone number. It is recorded NUL-repaired, through input redaction's text
 *   pass and output redaction's personal data, and cut to
 *   RECORDED_ACTION_MAX characters (recordedModelText). A short, clean name
 *   such as a typo ("lookupp") or another tool's action comes out of that
 *   unchanged, so ops still see and can filter on exactly what the model
 *   asked for; a shape check alone would not do ("x_4111111111111111" is a
 *   well-formed name). The result is never a catalog action of that tool
 *   unless the model sent one ("look\u0000up" → "look\uFFFDup"), so the
 *   call stays NOT_IN_MANIFEST on the record. The action digest still
 *   covers the exact action the model sent.
 * - Not a string (missing, a number, an object): "" as before.
 */
/**
 * The tool_use `name` as the ledger records it (tool_calls.tool_name, event
 * metadata): a catalog tool verbatim; anything else is model-written text like
 * an unknown action ("4111111111111111" and "sk_live_…" are well-formed
 * names), so it goes through the same redaction (recordedModelText). The digest still covers the
 * exact name.
 */
export function recordedToolName(toolName: string, catalog: Pick<ToolCatalogService, 'isTool'>): string {
  return catalog.isTool(toolName) ? toolName : recordedModelText(toolName, RECORDED_TOOL_NAME_MAX);
}

/** Longest tool name a tool_use may carry (parseToolUse). */
const RECORDED_TOOL_NAME_MAX = 128;

export function recordedAction(toolName: string, action: unknown, catalog: Pick<ToolCatalogService, 'find'>): string {
  if (typeof action !== 'string') return '';
  if (catalog.find(toolName, action)) return action;
  return recordedModelText(action, RECORDED_ACTION_MAX);
}
