import { isRecord } from '../policy/policy-equality.js';
import { credentialInIdentifiers } from './tool-use.js';

/** As a tool_use id is taken (tool-use.ts): 1-255 printable ASCII. */
const ID_RE = /^[\x21-\x7e]{1,255}$/;

/**
 * The id of a posted tool_use block when a problem may name it (withToolResult): one of the accepted shape that holds
 * no credential's (refused 400 for that, and never echoed). Null otherwise: the runtime answers the model for a block
 * it sent malformed.
 */
export function echoableToolUseId(block: unknown): string | null {
  const id = isRecord(block) ? block.id : undefined;
  return typeof id === 'string' && ID_RE.test(id) && !credentialInIdentifiers(id, undefined) ? id : null;
}
