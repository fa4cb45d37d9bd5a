/**
 * Jumio KYX tool. Medium risk although read-only: the answer is a person's
 * identity-verification verdict. The handler returns decisions only, never the
 * extracted document data (VENDORS.md §3.4).
 */
import type { ToolSpec } from '../vendor-handler.js';

// A regex rather than `format: uuid`: the pattern is enforced whatever ajv-formats setup the catalog uses.
// Either case is accepted; JumioHandler.canonicalParams lower-cases it before the policy, the ledger and Jumio see it.
// The same holds for accountId.
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
          'Get the status of a Jumio workflow execution; once PROCESSED, also the overall decision, risk score and per-check decisions (no personal data). ' +
          'Jumio files each end user\'s executions under that end user\'s own account: give accountId for an execution of any account other than ' +
          'the organization\'s default one.',
        inputSchema: {
          type: 'object',
          properties: {
            workflowExecutionId: { type: 'string', pattern: UUID_PATTERN, description: 'Jumio workflow execution id (UUID)' },
            // Jumio KYX keeps one account per end user, and an execution is found only under its own account
            // (GET /api/v1/accounts/{accountId}/workflow-executions/{id}, VENDORS.md §3.2): asked under another it is a 404.
            accountId: {
              type: 'string',
              pattern: UUID_PATTERN,
              description: 'Jumio account id (UUID) of the end user the execution belongs to; default: the organization\'s configured account',
            },
            includeDetails: { type: 'boolean', description: 'Fetch the decision when PROCESSED (default true)' },
          },
          required: ['workflowExecutionId'],
          additionalProperties: false,
        },
        riskLevel: 'medium',
        sideEffect: 'read',
        idempotent: true,
        costCents: 0,
        // JumioHandler asks under the account of the org's credentials when the call names none, which the policy
        // never reads: a rule on accountId must say whether it is for calls that name one (README "Tools").
        unseenDefaults: { accountId: "the account of the org's Jumio credentials is used" },
      },
    ],
  },
];
