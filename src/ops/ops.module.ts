import { Module } from '@nestjs/common';
import { PipelineModule } from '../pipeline.module.js';
import { ApprovalsGaugeService } from './approvals-gauge.service.js';
import { LedgerCursorCodec } from './ledger-cursor.js';
import { LedgerQueryService } from './ledger-query.service.js';
import { LedgerController } from './ledger.controller.js';
import { ToolCallsLedgerController } from './tool-calls-ledger.controller.js';
import { ToolCallsQueryService } from './tool-calls-query.service.js';
import { UsageController } from './usage.controller.js';
import { UsageService } from './usage.service.js';

/** Ops and audit surfaces: ledger listings and export, a call's story, chain verification, usage, the approvals gauge. */
@Module({
  imports: [PipelineModule],
  controllers: [ToolCallsLedgerController, LedgerController, UsageController],
  providers: [LedgerCursorCodec, ToolCallsQueryService, LedgerQueryService, UsageService, ApprovalsGaugeService],
})
export class OpsModule {}
