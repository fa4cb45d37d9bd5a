/** The GraphQL operations the Shopify emulator answers, over the shop it holds (ShopifyEmulator). */
import type { EmuOrder, EmuProduct } from './shopify.fixtures.js';
import { gid, listShapeOf, orderView, productView } from './shopify.graphql-view.js';
import type { ShopifyRefundDesk } from './shopify.refund-desk.js';
import { missingFields, NULL_VARIABLE, validationError, variableError, type VariableProblem } from './shopify.validation.js';

/** The emulated shop the operations read and change; the emulator passes its current state on each request (reset replaces the maps). */
export interface ShopifyStore {
  orders: Map<number, EmuOrder>;
  products: Map<number, EmuProduct>;
  refunds: ShopifyRefundDesk;
  missingScopes: ReadonlySet<string>;
}

/** Order fields an app may be refused, and the scope that guards each. */
const DENIABLE_ORDER_FIELDS: [field: string, scope: string][] = [['customer', 'read_customers']];
const IDEMPOTENT = /@idempotent\s*\(\s*key\s*:\s*(?:"([^"]*)"|\$(\w+))\s*\)/;
/** Non-null fields of RefundInput and of its OrderTransactionInput (all but parentId, VENDORS.md §1.8). */
const REFUND_INPUT_REQUIRED = ['orderId'] as const;
const REFUND_TRANSACTION_REQUIRED = ['orderId', 'amount', 'kind', 'gateway'] as const;

export type Gql = { data?: unknown; errors?: unknown[]; cost: number };

/** An error raised while the document runs: no `locations` or path of its own here. */
function gqlError(message: string, code: string): { message: string; extensions: { code: string } } {
  return { message, extensions: { code } };
}

/** The first field the document selects at its root, and where it stands. */
function rootField(query: string): { name: string; index: number } {
  const m = /\{\s*([A-Za-z_]\w*)/.exec(query);
  return m ? { name: m[1], index: m.index + m[0].length - m[1].length } : { name: '', index: -1 };
}

/** Requested query cost the emulator reports per operation (fixed: selections are not parsed). */
export function shopifyQueryCost(query: string): number {
  if (query.includes('refundCreate') || query.includes('orderUpdate')) return 10;
  if (/\border\s*\(/.test(query)) return 12;
  return 4;
}

/** The @idempotent key of a refundCreate, written as a literal or passed as a variable. */
export function idempotencyKeyOf(query: string, variables: Record<string, unknown>): unknown {
  const directive = IDEMPOTENT.exec(query);
  return directive ? (directive[1] ?? variables[directive[2] ?? '']) : undefined;
}

export function executeShopifyGraphql(store: ShopifyStore, query: string, variables: Record<string, unknown>, version: string): Gql {
  const cost = shopifyQueryCost(query);
  if (query.includes('refundCreate')) return { cost, ...refundCreate(store, query, variables, version) };
  if (query.includes('orderUpdate')) return { cost, ...orderUpdate(store, variables) };
  // Lists come back as long as the document's `first:` asks (and connections with pageInfo when selected).
  const lists = listShapeOf(query, variables);
  if (/\border\s*\(/.test(query)) {
    return { cost, ...withoutDeniedFields(store, lookup('Order', query, variables, (id) => store.orders.get(id), (o) => orderView(o, lists), 'order'), query) };
  }
  if (/\bproduct\s*\(/.test(query)) return { cost, ...lookup('Product', query, variables, (id) => store.products.get(id), (p) => productView(p, lists), 'product') };
  // Anything else is a field the emulated schema lacks: refused by validation, as Shopify refuses an unknown field.
  const field = rootField(query);
  const typeName = /^\s*mutation\b/.test(query) ? 'Mutation' : 'QueryRoot';
  const message = `Field '${field.name}' doesn't exist on type '${typeName}' (the emulator does not support this operation)`;
  return { cost, errors: [validationError(query, field.index, [field.name], message, { code: 'undefinedField', typeName, fieldName: field.name })] };
}

/**
 * An app without `read_customers`: GraphQL nulls the field it
 * may not read and says why in `errors` with its path, the rest of the answer stands (VENDORS.md §1.4).
 */
function withoutDeniedFields(store: ShopifyStore, result: Omit<Gql, 'cost'>, query: string): Omit<Gql, 'cost'> {
  const order = (result.data as { order?: Record<string, unknown> | null } | undefined)?.order;
  if (!order) return result;
  const errors: unknown[] = [];
  for (const [field, scope] of DENIABLE_ORDER_FIELDS) {
    if (!store.missingScopes.has(scope) || !new RegExp(`\\b${field}\\b`).test(query)) continue;
    order[field] = null;
    errors.push({
      message: `Access denied for ${field} field. Required access: \`${scope}\` access scope.`,
      locations: [{ line: 1, column: 1 }],
      path: ['order', field],
      extensions: { code: 'ACCESS_DENIED', documentation: 'https://shopify.dev/api/usage/access-scopes', requiredAccess: `\`${scope}\` access scope.` },
    });
  }
  return errors.length > 0 ? { ...result, errors } : result;
}

function lookup<T>(
  type: string,
  query: string,
  variables: Record<string, unknown>,
  find: (id: number) => T | undefined,
  view: (item: T) => Record<string, unknown>,
  field: string,
): Omit<Gql, 'cost'> {
  const literal = new RegExp(`\\(\\s*id\\s*:\\s*"([^"]*)"`).exec(query);
  const raw = typeof variables.id === 'string' ? variables.id : literal?.[1];
  if (raw === undefined) {
    const given = variables.id;
    const problem = given === undefined || given === null ? NULL_VARIABLE : { path: [], explanation: 'Could not coerce value to ID' };
    return { errors: [variableError(query, 'id', given, [problem])] };
  }
  const m = new RegExp(`^gid://shopify/${type}/(\\d+)$`).exec(raw);
  if (!m && typeof variables.id === 'string') return { errors: [variableError(query, 'id', raw, [{ path: [], explanation: `Invalid global id '${raw}'` }])] };
  if (!m) {
    const at = literal ? literal.index + literal[0].indexOf('"') : -1;
    return { errors: [validationError(query, at, [field, 'id'], `Invalid global id '${raw}'`, { code: 'argumentLiteralsIncompatible' })] };
  }
  const item = find(Number(m[1]));
  return { data: { [field]: item === undefined ? null : view(item) } };
}

function orderUpdate(store: ShopifyStore, variables: Record<string, unknown>): Omit<Gql, 'cost'> {
  const input = (variables.input ?? {}) as { id?: unknown; note?: unknown };
  const m = typeof input.id === 'string' ? /^gid:\/\/shopify\/Order\/(\d+)$/.exec(input.id) : null;
  const order = m ? store.orders.get(Number(m[1])) : undefined;
  if (!order) return { data: { orderUpdate: { order: null, userErrors: [{ field: ['id'], message: 'Order does not exist' }] } } };
  // OrderInput.note overwrites (VENDORS.md §1.7): the same request twice leaves the same state.
  if (input.note !== undefined) order.note = typeof input.note === 'string' ? input.note : null;
  return { data: { orderUpdate: { order: { id: gid('Order', order.id), note: order.note }, userErrors: [] } } };
}

function refundCreate(store: ShopifyStore, query: string, variables: Record<string, unknown>, version: string): Omit<Gql, 'cost'> {
  const directive = IDEMPOTENT.exec(query);
  const directiveAt = query.indexOf('@idempotent');
  const before2026 = version !== 'unstable' && version < '2026-01';
  if (before2026 && directiveAt >= 0) {
    const extensions = { code: 'undefinedDirective', directiveName: 'idempotent' };
    return { errors: [validationError(query, directiveAt, ['refundCreate'], "Directive 'idempotent' is not defined", extensions)] };
  }
  // Variables are checked against their types before anything runs: a refused one uses no key up.
  const inputName = /refundCreate\s*\(\s*input\s*:\s*\$(\w+)/.exec(query)?.[1] ?? 'input';
  const problems = refundInputProblems(variables[inputName]);
  if (problems.length > 0) return { errors: [variableError(query, inputName, variables[inputName], problems)] };
  if (!directive && (version === 'unstable' || version >= '2026-04')) {
    // Mandatory from 2026-04: a run-time error, the schema does not mark it required (VENDORS.md §1.9).
    return { errors: [gqlError('The @idempotent directive with a key is required for this mutation.', 'BAD_REQUEST')], data: { refundCreate: null } };
  }
  const key = idempotencyKeyOf(query, variables);
  if (directive && (typeof key !== 'string' || key === '')) {
    return { errors: [gqlError('Idempotency key must not be empty.', 'BAD_REQUEST')], data: { refundCreate: null } };
  }
  // Before 2026-04 a refund without a key is accepted and never deduplicated.
  return { data: { refundCreate: store.refunds.create(store.orders, typeof key === 'string' ? key : undefined, variables[inputName]) } };
}

/** What makes a RefundInput! variable unfit for its type: a non-null field left out (VENDORS.md §1.8). */
function refundInputProblems(input: unknown): VariableProblem[] {
  if (input === undefined || input === null) return [NULL_VARIABLE];
  if (typeof input !== 'object' || Array.isArray(input)) return [{ path: [], explanation: 'Expected value to be an input object' }];
  const fields = input as Record<string, unknown>;
  const problems = missingFields(fields, REFUND_INPUT_REQUIRED);
  const transactions = Array.isArray(fields.transactions) ? (fields.transactions as unknown[]) : [];
  for (const [i, t] of transactions.entries()) {
    if (t !== null && typeof t === 'object') problems.push(...missingFields(t as Record<string, unknown>, REFUND_TRANSACTION_REQUIRED, ['transactions', i]));
  }
  return problems;
}
