import { AppError } from '../common/errors/app-error.js';
import { isEchoableFieldName } from '../common/echoable-field-name.js';
import { HOLDS_CREDENTIAL, holdsCredentialShape } from '../redaction/credential-shape.js';

/**
 * The refusal of a NEW call whose tool_use id or Idempotency-Key holds a credential by its shape (identifiers are
 * stored, chained into events and shown back as sent), or null. Asked only once no call is stored under the key: a
 * call recorded before the gateway refused such ids is still replayed (and holds the batch's writes after it).
 */
export function credentialInIdentifiers(toolUseId: string, idempotencyHeader: unknown): AppError | null {
  if (typeof idempotencyHeader === 'string' && holdsCredentialShape(idempotencyHeader)) return new AppError('BAD_REQUEST', `Idempotency-Key ${HOLDS_CREDENTIAL}`);
  if (holdsCredentialShape(toolUseId)) return new AppError('BAD_REQUEST', `id ${HOLDS_CREDENTIAL}`);
  return null;
}

/** A tool_use block as the model emitted it (Anthropic shape). */
export interface ToolUse {
  id: string;
  name: string;
  action: unknown;
  /** input without `action` */
  params: Record<string, unknown>;
}

const ID_RE = /^[\x21-\x7e]{1,255}$/;
const NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;
const IDEMPOTENCY_KEY_RE = /^[\x20-\x7e]{1,255}$/;

/**
 * The id of a posted tool_use block when a problem answered to it may name it (withToolResult): one parseToolUse takes
 * that holds no credential's shape (refused 400 for that, and never echoed). Null otherwise: the runtime answers the
 * model for a block it sent malformed.
 */
export function echoableToolUseId(block: unknown): string | null {
  const id = isPlainObject(block) ? block.id : undefined;
  return typeof id === 'string' && ID_RE.test(id) && !holdsCredentialShape(id) ? id : null;
}

/** The first unknown key that may be named back, else words that name none (a 400 never echoes a token-like key). */
export function unknownFieldName(keys: string[]): string {
  const named = keys.find(isEchoableFieldName);
  return named !== undefined ? named.slice(0, 64) : 'a key not named as it does not look like a field name';
}

/**
 * The fields of the Messages API's ToolUseBlock, so a block is posted as the API returned it: besides the four read,
 * `cache_control`, `caller` (required in the SDKs' response types: {"type": "direct"}, or the code execution tool that
 * called it) and `toolset_name` are accepted and ignored — they say nothing about what the call does.
 */
const TOOL_USE_FIELDS: ReadonlySet<string> = new Set(['type', 'id', 'name', 'input', 'cache_control', 'caller', 'toolset_name']);

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses the request body as a tool_use block; anything else is 400 BAD_REQUEST
 * and nothing is recorded. The tool name's format is checked here (a look-alike
 * such as Cyrillic letters is not a tool_use we could ever run); whether the
 * tool exists is the manifest's business and is recorded.
 */
export function parseToolUse(body: unknown): ToolUse {
  if (!isPlainObject(body)) throw new AppError('BAD_REQUEST', 'body must be a tool_use block');
  const extra = Object.keys(body).filter((k) => !TOOL_USE_FIELDS.has(k));
  // Named only when it looks like a field name: never a token pasted as a key (echoable-field-name.ts).
  if (extra.length) throw new AppError('BAD_REQUEST', `unknown field in tool_use: ${unknownFieldName(extra)}${otherShapeHint(body)}`);
  if (body.type !== 'tool_use') throw new AppError('BAD_REQUEST', 'type must be "tool_use"');
  if (typeof body.id !== 'string' || !ID_RE.test(body.id)) throw new AppError('BAD_REQUEST', 'id must be 1-255 printable ASCII characters');
  if (typeof body.name !== 'string' || !NAME_RE.test(body.name)) throw new AppError('BAD_REQUEST', 'name must be 1-128 of [A-Za-z0-9_.-]');
  if (!isPlainObject(body.input)) throw new AppError('BAD_REQUEST', 'input must be an object');
  const { action, ...params } = body.input;
  return { id: body.id, name: body.name, action, params };
}

/**
 * An OpenAI tool call posted as it came (Chat Completions' {id, type: "function", function: {name, arguments}}, or a
 * Responses API function_call item {type, call_id, name, arguments}): said, with the shape to post instead.
 */
function otherShapeHint(body: Record<string, unknown>): string {
  const openAi = body.type === 'function' || body.type === 'function_call' || 'function' in body || 'call_id' in body || 'arguments' in body;
  return openAi ? ' (an OpenAI tool call? post it as {"type":"tool_use","id":<its id or call_id>,"name":<its name>,"input":<its arguments, parsed>})' : '';
}

/** Explicit Idempotency-Key (unique per org) or the default: run id + tool_use id. */
export function idempotencyKeyFor(header: unknown, runId: string, toolUseId: string): string {
  if (header === undefined) return `run:${runId}:${toolUseId}`;
  if (typeof header !== 'string' || !IDEMPOTENCY_KEY_RE.test(header)) {
    throw new AppError('BAD_REQUEST', 'Idempotency-Key must be 1-255 printable ASCII characters');
  }
  return `key:${header}`;
}

/**
 * The idempotency key as the client knows it (ToolCall.idempotencyKey): the
 * Idempotency-Key header it sent, or, for the default key, the tool_use id
 * (scoped to the call's run, API.md §4). The stored form's prefix only keeps
 * the two kinds apart in the org-wide unique index.
 */
export function clientIdempotencyKey(stored: string): string {
  if (stored.startsWith('key:')) return stored.slice('key:'.length);
  if (stored.startsWith('run:')) {
    const afterRun = stored.indexOf(':', 'run:'.length);
    if (afterRun > 0) return stored.slice(afterRun + 1);
  }
  return stored;
}
