/**
 * Amazon SP-API tools (Orders v0, or v2026-01-01 with AMAZON_ORDERS_API: same
 * schemas and results). Reads only, so both actions are low risk,
 * idempotent and retried freely by the executor (VENDORS.md §5).
 */
import type { ToolSpec } from '../vendor-handler.js';

/** SP-API order ids are 3-7-7 digits, e.g. 112-0000001-1234567. */
export const AMAZON_ORDER_ID_PATTERN = '^\\d{3}-\\d{7}-\\d{7}$';
export const AMAZON_ORDER_ID = new RegExp(AMAZON_ORDER_ID_PATTERN);

const orderIdSchema = {
  type: 'object',
  properties: {
    orderId: {
      type: 'string',
      pattern: AMAZON_ORDER_ID_PATTERN,
      description: 'Amazon order id, 3-7-7 digits (e.g. 112-0000001-1234567)',
    },
  },
  required: ['orderId'],
  additionalProperties: false,
};

export const AMAZON_TOOLS: ToolSpec[] = [
  {
    name: 'amazon_query',
    vendor: 'amazon',
    description: 'Read Amazon seller orders through the Selling Partner API.',
    actions: [
      {
        name: 'get_order',
        description:
          'Get one order: status, purchase date, fulfillment channel, total, buyer email (Amazon\'s anonymised relay address) and where it ships: ' +
          'city, state or region, postal code and country only (Amazon gives the street and the name only to apps with restricted-data access).',
        inputSchema: orderIdSchema,
        riskLevel: 'low',
        sideEffect: 'read',
        idempotent: true,
        costCents: 0,
      },
      {
        name: 'get_order_items',
        description:
          'List the items of one order: ASIN, SKU, title, quantities ordered and shipped, and `itemPrice`: the selling price of the line, ' +
          'that is the unit price times the quantity ordered, without shipping or tax.',
        inputSchema: orderIdSchema,
        riskLevel: 'low',
        sideEffect: 'read',
        idempotent: true,
        costCents: 0,
      },
    ],
  },
];
