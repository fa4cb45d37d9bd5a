/**
 * The Shopify tools of the catalog (API.md §2). Ids are numeric strings: the
 * handler builds GIDs from them, so nothing else may reach a query.
 */
import type { JsonSchema, ToolSpec } from '../vendor-handler.js';
import { ORDER_LIST_FIRST, PRODUCT_VARIANTS_FIRST } from './shopify.graphql.js';

// One spelling per id: Shopify reads "012345" as order 12345, so a policy comparing ids as text would see another order than the one acted on.
// At most 19 digits: Shopify's ids are 64-bit integers (isShopifyId holds a 19-digit one to the 64-bit maximum).
export const SHOPIFY_ID_PATTERN = '^[1-9][0-9]{0,18}$';
/** The largest Shopify id, 2^63 − 1: above it no such order or product can exist. */
export const SHOPIFY_ID_MAX = 9223372036854775807n;
const ID = new RegExp(SHOPIFY_ID_PATTERN);

/** A Shopify id as the schema takes it (one spelling) and within 64 bits; a pattern cannot say the latter simply. */
export function isShopifyId(id: unknown): id is string {
  return typeof id === 'string' && ID.test(id) && BigInt(id) <= SHOPIFY_ID_MAX;
}
// Up to 3 decimals, the most a currency has (KWD, BHD...): the handler holds the amount to its currency's own (currencyDecimals).
// More than 0 is said in the description and checked by validate() ("amount must be greater than 0"): a pattern
// saying it would answer the model with the pattern's text instead.
export const REFUND_AMOUNT_PATTERN = '^\\d{1,9}(\\.\\d{1,3})?$';
export const NOTE_MAX_LENGTH = 5000;
export const REFUND_NOTE_MAX_LENGTH = 500;

function objectSchema(properties: Record<string, JsonSchema>, required: string[]): JsonSchema {
  return { type: 'object', properties, required, additionalProperties: false };
}

const orderId: JsonSchema = {
  type: 'string',
  pattern: SHOPIFY_ID_PATTERN,
  description:
    'Numeric Shopify order id, e.g. "450789469" (at most 9223372036854775807): the id in the order\'s admin URL, not its name such as "#1001" that customers quote',
};

export const SHOPIFY_TOOLS: ToolSpec[] = [
  {
    name: 'order_lookup',
    vendor: 'shopify',
    description:
      'Look up a Shopify order: status, the currency the customer paid in, its total and what was refunded of it so far, the merchant\'s note, ' +
      'tracking (number, carrier, tracking page), items with their unit price, customer contact and shipping address.',
    actions: [
      {
        name: 'lookup',
        description:
          `Fetch one order by its numeric id. At most ${ORDER_LIST_FIRST.lineItems} line items, ${ORDER_LIST_FIRST.fulfillments} fulfillments ` +
          `and ${ORDER_LIST_FIRST.trackingInfo} tracking numbers per fulfillment are read: ` +
          'when the order has more, those lists are cut and the result says `truncated: true`.',
        inputSchema: objectSchema({ orderId }, ['orderId']),
        riskLevel: 'low',
        sideEffect: 'read',
        idempotent: true,
        costCents: 1,
      },
    ],
  },
  {
    name: 'shopify_query',
    vendor: 'shopify',
    description: 'Read Shopify catalog data.',
    actions: [
      {
        name: 'get_product',
        description:
          `Fetch one product (title, status, variants with SKU and price) by its numeric id. At most ${PRODUCT_VARIANTS_FIRST} variants are read: ` +
          `when the product has more, \`variants\` holds the first ${PRODUCT_VARIANTS_FIRST} and the result says \`truncated: true\`.`,
        inputSchema: objectSchema(
          { productId: { type: 'string', pattern: SHOPIFY_ID_PATTERN, description: 'Numeric Shopify product id (at most 9223372036854775807)' } },
          ['productId'],
        ),
        riskLevel: 'low',
        sideEffect: 'read',
        idempotent: true,
        costCents: 1,
      },
    ],
  },
  {
    name: 'shopify_order',
    vendor: 'shopify',
    description: 'Change a Shopify order.',
    actions: [
      {
        name: 'add_note',
        description:
          'Set the order note to the given text. Shopify keeps one note per order and this replaces it: to add to a note, ' +
          'read the current one (order_lookup\'s `note`) and send it with your addition; an empty note clears it.',
        inputSchema: objectSchema(
          { orderId, note: { type: 'string', maxLength: NOTE_MAX_LENGTH, description: 'The full new note text ("" clears the note)' } },
          ['orderId', 'note'],
        ),
        riskLevel: 'medium',
        sideEffect: 'write',
        // orderUpdate overwrites the note with the final text we send, so a
        // resend leaves the same state (VENDORS.md §1.7), and so does a new call.
        idempotent: true,
        overwrite: true,
        costCents: 2,
      },
    ],
  },
  {
    name: 'shopify_refund',
    vendor: 'shopify',
    description: 'Refund money on a Shopify order.',
    actions: [
      {
        name: 'create',
        description:
          'Refund an amount to the original payment of the order, in the currency the customer paid in. ' +
          'One refund goes back to one payment: when the order was paid in parts (a gift card and a card, say), an amount more than any one ' +
          'payment can still take back is refused; refund such an amount as one call per payment. ' +
          'When that is not the shop\'s currency, name it in `currency` (order_lookup gives the order\'s `currency`): the refund is refused otherwise. ' +
          'The result\'s `status` is `success` when Shopify reports the money returned, `pending` when Shopify accepted ' +
          'the refund but has not confirmed yet that the money moved (the refund is recorded: do not send it again).',
        inputSchema: objectSchema(
          {
            orderId,
            amount: {
              type: 'string',
              pattern: REFUND_AMOUNT_PATTERN,
              description:
                'Decimal amount, more than 0, in the currency the customer paid in, with at most that currency\'s decimals: ' +
                '2 for most ("19.99" EUR), 0 for some ("2500" JPY), 3 for some ("12.345" KWD). More is refused.',
            },
            currency: {
              type: 'string',
              pattern: '^[A-Z]{3}$',
              description: 'ISO 4217 code of the amount, e.g. "EUR": the currency the customer paid in. Required when it is not the shop\'s',
            },
            note: { type: 'string', maxLength: REFUND_NOTE_MAX_LENGTH, description: 'Reason shown on the refund' },
          },
          ['orderId', 'amount'],
        ),
        riskLevel: 'high',
        sideEffect: 'write',
        // Not idempotent by nature: a second refundCreate is a second refund.
        // It is safe to resend ONLY because every attempt carries the same
        // @idempotent key, derived from the ledger identity (orgId +
        // idempotencyKey) and never from the attempt, and the same input; Shopify
        // then returns the original refund (VENDORS.md §1.9). Changing either
        // derivation makes this flag a lie.
        idempotent: true,
        // A new call is a new key: a second refund.
        overwrite: false,
        costCents: 5,
        // "100", "100.0" and "0100" are one refund of 100 (formatAmount): a rule's amount matches by value.
        decimalParams: ['amount'],
        // buildRefundInput sends the order's currency when the call names none, and Shopify tells it only when the
        // call runs: a rule on currency must say whether it is for calls that name one (README "Tools").
        unseenDefaults: { currency: "the refund is in the order's currency" },
      },
    ],
  },
];
