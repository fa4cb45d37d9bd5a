/**
 * The tool_use block as parseToolUse accepts it (tool-use.ts), for the OpenAPI document of the single and batch
 * routes. parseToolUse is the authority: openapi-request-bodies.spec checks that this schema and it agree.
 */
export const TOOL_USE_SCHEMA = {
  type: 'object',
  description: 'a tool_use block as the model emitted it (Anthropic shape); nothing else is accepted',
  required: ['type', 'id', 'name', 'input'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: ['tool_use'] },
    id: {
      type: 'string',
      pattern: '^[\\x21-\\x7e]{1,255}$',
      minLength: 1,
      maxLength: 255,
      example: 'toolu_01A09q90qw90lq917835lq9',
      description: 'printable ASCII without blanks, holding no credential (an access token\'s or key\'s shape: 400); with the run id, the default idempotency key',
    },
    name: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,128}$', minLength: 1, maxLength: 128, example: 'order_lookup', description: 'the tool' },
    input: {
      type: 'object',
      additionalProperties: true,
      description: 'the action and its params; a tool of the run whose input has no string `action` is recorded and answers 422 INVALID_INPUT',
      properties: { action: { type: 'string', example: 'lookup' } },
      example: { action: 'lookup', orderId: '12345' },
    },
    cache_control: { description: 'Anthropic prompt caching marker such as {"type": "ephemeral"}: accepted, any value, and ignored' },
    caller: {
      description:
        'who invoked the tool, as the Messages API reports it ({"type": "direct"}, or a code execution tool under programmatic tool calling): accepted, any value, and ignored (not part of the action digest)',
    },
    toolset_name: { description: 'the toolset family of a toolset member tool_use (Messages API): accepted, any value, and ignored' },
  },
};
