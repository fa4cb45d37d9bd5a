import { Module } from '@nestjs/common';
import { CatalogController } from './catalog/catalog.controller.js';
import { ToolCatalogService } from './catalog/tool-catalog.service.js';
import { CredentialsController } from './credentials/credentials.controller.js';
import { CredentialsService } from './credentials/credentials.service.js';
import { MasterKeyCheck } from './credentials/master-key-check.js';
import { RuntimeToolExecutor } from './executor/runtime-tool-executor.js';
import { ToolPermissionsController } from './permissions/tool-permissions.controller.js';
import { ToolPermissionsService } from './permissions/tool-permissions.service.js';
import { PoliciesController } from './policy/policies.controller.js';
import { PoliciesService } from './policy/policies.service.js';
import { RunsController } from './runs/runs.controller.js';
import { RunsService } from './runs/runs.service.js';
import { Sql } from './db/sql.js';
import { OrphanSweeperService } from './tool-calls/orphan-sweeper.service.js';
import { ReconcileService } from './tool-calls/reconcile.service.js';
import { ResultsStore } from './tool-calls/results.store.js';
import { ToolCallBatchController } from './tool-calls/batch/tool-call-batch.controller.js';
import { ToolCallBatchService } from './tool-calls/batch/tool-call-batch.service.js';
import { ToolCallLedger } from './tool-calls/tool-call-ledger.js';
import { ToolCallResultsService } from './tool-calls/tool-call-results.service.js';
import { ToolCallsController } from './tool-calls/tool-calls.controller.js';
import { ToolCallsService } from './tool-calls/tool-calls.service.js';
import { OutcomeRecorder } from './tool-calls/outcome-recorder.js';
import { StoredCallAnswers } from './tool-calls/stored-call-answers.js';
import { VendorAdmission } from './tool-calls/vendor-admission.js';
import { VendorRegistry } from './vendors/vendor-registry.js';
import { OrgDigestKeys } from './orgs/org-digest-keys.js';
import { VendorTokenStore } from './credentials/vendor-token.store.js';

/** The governed tool call: catalog, permissions, policy, runs, credentials, executor and the pipeline itself. */
@Module({
  controllers: [CatalogController, ToolPermissionsController, PoliciesController, RunsController, CredentialsController, ToolCallsController, ToolCallBatchController],
  providers: [
    Sql, VendorTokenStore, VendorRegistry, ToolCatalogService, ToolPermissionsService, PoliciesService, RunsService, CredentialsService, RuntimeToolExecutor,
    ResultsStore, ToolCallLedger, ToolCallsService, ToolCallResultsService, OrphanSweeperService, ReconcileService,
    ToolCallBatchService, StoredCallAnswers, OutcomeRecorder, VendorAdmission, MasterKeyCheck, OrgDigestKeys,
  ],
  exports: [
    Sql, VendorRegistry, ToolCatalogService, ToolPermissionsService, PoliciesService, RunsService, CredentialsService, RuntimeToolExecutor,
    ResultsStore, ToolCallLedger, ToolCallsService, ToolCallResultsService,
  ],
})
export class PipelineModule {}
