/** The feature modules of the pipeline and its surfaces, in one list so adding one is a one-line change. */
import { ApprovalsModule } from './approvals/approvals.module.js';
import { OpsModule } from './ops/ops.module.js';
import { PipelineModule } from './pipeline.module.js';

export const ToolGatewayModules = [PipelineModule, OpsModule, ApprovalsModule];
