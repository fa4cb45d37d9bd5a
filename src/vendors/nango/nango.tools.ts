/**
 * Nango proxy tools: a credentialed pass-through to whatever provider the org's
 * Nango connection points at, hence medium risk for reads and high for writes.
 * A POST through Nango is never idempotent (VENDORS.md §4.1): the executor must
 * not retry it. Path and query safety lives in nango-path.ts (validate()).
 */
import type { ToolSpec } from '../vendor-handler.js';
import { NANGO_CANONICAL_PATH_MAX, NANGO_PATH_MAX, NANGO_TARGET_MAX, QUERY_MAX_KEYS, QUERY_NAME_MAX, QUERY_VALUE_MAX } from './nango-path.js';

const path = {
  type: 'string',
  minLength: 1,
  // The catalog checks this schema on the path as the gateway spells it, with its leading "/" added
  // (NangoHandler.canonicalParams): NANGO_PATH_MAX characters after the "/", whether the caller sent it or not.
  maxLength: NANGO_CANONICAL_PATH_MAX,
  description:
    `Provider API path relative to the provider's base URL, e.g. /v1/customers/42 (no host, no query string); at most ${NANGO_PATH_MAX} characters not counting the leading "/" (${NANGO_CANONICAL_PATH_MAX} with it). ` +
    "Letters, digits, -._~ and !$&'()*+,=: as themselves; other characters (a space, a non-ASCII letter) percent-encoded as UTF-8 (José is Jos%C3%A9); " +
    "not allowed in any form, plain or percent-encoded: @ ; ? # { } \\ and || (query parameters go in `query`); no encoded '/' (%2F), no double encoding, no '.' or '..' segments, no empty segments; characters in their plain form (é, not e with a combining accent; no fullwidth look-alikes)",
};

export const NANGO_TOOLS: ToolSpec[] = [
  {
    name: 'nango_proxy',
    vendor: 'nango',
    description: "Call the org's connected provider API through the Nango proxy.",
    actions: [
      {
        name: 'get',
        description: 'GET a provider API path through Nango.',
        inputSchema: {
          type: 'object',
          properties: {
            path,
            query: {
              type: 'object',
              description:
                `Query parameters (string, number or boolean values; the URL with them, percent-encoded, at most ${NANGO_TARGET_MAX} characters). Names may not be Nango controls: authorization, connection_id, provider_config_key, base_url_override, retries, retry_on, decompress, forward_headers_on_redirect, or anything starting with nango (in any case, with or without - and _)`,
              // The limits checkNangoQuery enforces, so that what the definition allows is not refused after.
              additionalProperties: { anyOf: [{ type: 'string', maxLength: QUERY_VALUE_MAX }, { type: 'number' }, { type: 'boolean' }] },
              propertyNames: { minLength: 1, maxLength: QUERY_NAME_MAX },
              maxProperties: QUERY_MAX_KEYS,
            },
          },
          required: ['path'],
          additionalProperties: false,
        },
        riskLevel: 'medium',
        sideEffect: 'read',
        idempotent: true,
        costCents: 0,
        pathParams: ['path'],
        // buildNangoProxyUrl sends every query value as String(v): false and "false" are one ?dryRun=false.
        textParams: ['query'],
      },
      {
        name: 'post',
        description: 'POST a JSON body to a provider API path through Nango (a write; never retried automatically).',
        inputSchema: {
          type: 'object',
          properties: { path, body: { type: 'object', description: 'JSON body sent to the provider' } },
          required: ['path', 'body'],
          additionalProperties: false,
        },
        riskLevel: 'high',
        sideEffect: 'write',
        idempotent: false,
        overwrite: false,
        costCents: 0,
        pathParams: ['path'],
      },
    ],
  },
];
