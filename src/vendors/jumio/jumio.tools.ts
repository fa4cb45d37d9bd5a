/**
 * Jumio KYX tool. Medium risk although read-only: the answer is a person's
 * identity-verification verdict. The handler returns decisions only, never the
 * extracted document data (VENDORS.md §3.4).
 */
import type { ToolSpec } from '../vendor-handler.js';

// A regex rather than `format: uuid`: the pattern is enforced whatever ajv-formats setup the catalog uses.
// Either case is accepted; JumioHandler.canonicalParams lower-cases it before the policy, the ledger and Jumio see it.
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const UUID = new RegExp(UUID_PATTERN);

export const JUMIO_TOOLS: ToolSpec[] = [
  {
    name: 'kyc',
    vendor: 'jumio',
    description: 'Identity verification (Jumio KYX) status and decision for a workflow execution.',
    actions: [
      {
        name: 'get_status',
        description:
          'Get the status of a Jumio workflow execution; once PROCESSED, also the overall decision, risk score and per-check decisions (no personal data).',
        inputSchema: {
          type: 'object',
          properties: {
            workflowExecutionId: { type: 'string', pattern: UUID_PATTERN, description: 'Jumio workflow execution id (UUID)' },
            includeDetails: { type: 'boolean', description: 'Fetch the decision when PROCESSED (default true)' },
          },
          required: ['workflowExecutionId'],
          additionalProperties: false,
        },
        riskLevel: 'medium',
        sideEffect: 'read',
        idempotent: true,
        costCents: 0,
      },
    ],
  },
];
