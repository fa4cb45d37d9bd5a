import { ApprovalRequestEntity } from '../approvals/approval-request.entity.js';
import { ApiKeyEntity } from '../auth/api-key.entity.js';
import { IntegrationCredentialEntity } from '../credentials/integration-credential.entity.js';
import { LedgerEventEntity } from '../ledger/ledger-event.entity.js';
import { FeatureFlagEntity } from '../orgs/feature-flag.entity.js';
import { OrgEntity } from '../orgs/org.entity.js';
import { ToolPermissionEntity } from '../permissions/tool-permission.entity.js';
import { PolicyDecisionEntity } from '../policy/policy-decision.entity.js';
import { PolicyEntity } from '../policy/policy.entity.js';
import { AgentRunEntity } from '../runs/agent-run.entity.js';
import { ToolCallInputEntity } from '../tool-calls/tool-call-input.entity.js';
import { ToolCallResultEntity } from '../tool-calls/tool-call-result.entity.js';
import { ToolCallEntity } from '../tool-calls/tool-call.entity.js';

export const ENTITIES = [
  OrgEntity,
  ApiKeyEntity,
  FeatureFlagEntity,
  ToolPermissionEntity,
  PolicyEntity,
  PolicyDecisionEntity,
  AgentRunEntity,
  ToolCallEntity,
  ToolCallResultEntity,
  ToolCallInputEntity,
  ApprovalRequestEntity,
  IntegrationCredentialEntity,
  LedgerEventEntity,
];
