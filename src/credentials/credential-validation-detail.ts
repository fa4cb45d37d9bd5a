import type { ErrorObject } from 'ajv';

/**
 * The 400 detail for a credentials config Ajv refused. It names only fields the schema declares and never echoes a
 * value or an unknown key: a config is all secrets, and a token pasted as a property name is still a token.
 */
export function credentialValidationDetail(schema: Record<string, unknown>, error: ErrorObject): string {
  const known = Object.keys((schema.properties ?? {}) as Record<string, unknown>);
  if (error.keyword === 'additionalProperties') return `config: an unknown field is not allowed (known fields: ${known.join(', ')})`;
  const field = error.keyword === 'required' ? (error.params as { missingProperty: string }).missingProperty : firstSegment(error.instancePath);
  const message = error.message ?? 'is invalid';
  // instancePath is empty when config itself is wrong (missing, not an object): "config: must be object".
  return field !== undefined && known.includes(field) ? `config.${field}: ${message}` : `config: ${message}`;
}

/** "/accessToken" → "accessToken"; "" → undefined. A JSON pointer's first segment, unescaped. */
function firstSegment(instancePath: string): string | undefined {
  if (instancePath === '') return undefined;
  return instancePath.split('/')[1]?.replace(/~1/g, '/').replace(/~0/g, '~');
}
