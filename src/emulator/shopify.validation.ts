/**
 * Errors Shopify raises before a document runs, in the shape its GraphQL
 * server (graphql-ruby) gives them: static validation errors carry
 * `locations` and a path into the document that starts at the operation
 * ("mutation Refund", "query" when anonymous), never at a response key;
 * variable errors carry `locations` (the variable's definition) and no path
 * (VENDORS.md §1.4). Clients tell them from execution errors by exactly that.
 */

export interface Location {
  line: number;
  column: number;
}

const OPERATION = /^\s*(query|mutation|subscription)\b\s*([A-Za-z_]\w*)?/;

/** The document path's first element: graphql-ruby names the operation by its type and name. */
export function operationPathHead(query: string): string {
  const m = OPERATION.exec(query);
  if (!m) return 'query'; // the `{ … }` shorthand is an anonymous query
  return m[2] ? `${m[1]} ${m[2]}` : m[1];
}

/** Line and column (both from 1) of a character of the document; its start when not found. */
export function locate(query: string, index: number): Location {
  if (index < 0) return { line: 1, column: 1 };
  const before = query.slice(0, index).split('\n');
  return { line: before.length, column: before[before.length - 1].length + 1 };
}

/** A static validation error on `fieldPath` (the fields from the root down), pointing at `index` of the document. */
export function validationError(query: string, index: number, fieldPath: string[], message: string, extensions: { code: string } & Record<string, unknown>) {
  return { message, locations: [locate(query, index)], path: [operationPathHead(query), ...fieldPath], extensions };
}

export interface VariableProblem {
  path: (string | number)[];
  explanation: string;
}

/** Shopify's answer to a variable that does not fit its declared type (INVALID_VARIABLE, no path: nothing ran). */
export function variableError(query: string, name: string, value: unknown, problems: VariableProblem[]) {
  const declared = new RegExp(`\\$${name}\\s*:\\s*([\\w!\\[\\]]+)`).exec(query);
  const type = declared?.[1] ?? 'unknown';
  const detail = problems.every((p) => p.path.length === 0)
    ? ''
    : ` for ${problems.map((p) => `${p.path.join('.')} (${p.explanation})`).join(', ')}`;
  return {
    message: `Variable $${name} of type ${type} was provided invalid value${detail}`,
    locations: [locate(query, declared ? declared.index : -1)],
    extensions: { code: 'INVALID_VARIABLE', value: value ?? null, problems },
  };
}

const NOT_NULL = 'Expected value to not be null';

/** Problems of the required (non-null) fields `required` missing from an input object at `at`. */
export function missingFields(input: Record<string, unknown>, required: readonly string[], at: (string | number)[] = []): VariableProblem[] {
  return required.filter((f) => input[f] === undefined || input[f] === null).map((f) => ({ path: [...at, f], explanation: NOT_NULL }));
}

/** The problem of a non-null variable given no value. */
export const NULL_VARIABLE: VariableProblem = { path: [], explanation: NOT_NULL };
