import { Module } from '@nestjs/common';
import { LedgerCursorCodec } from '../ops/ledger-cursor.js';
import { PipelineModule } from '../pipeline.module.js';
import { ApprovalsController } from './approvals.controller.js';
import { ApprovalsService } from './approvals.service.js';
import { ApprovedCallClaimer } from './approved-call-claimer.js';
import { ApprovedCallRunner } from './approved-call-runner.service.js';

/** Human approval of risky calls: listing, deciding exactly once, running approved calls once, expiry. */
@Module({
  imports: [PipelineModule],
  controllers: [ApprovalsController],
  providers: [ApprovalsService, ApprovedCallRunner, ApprovedCallClaimer, LedgerCursorCodec],
  exports: [ApprovedCallRunner],
})
export class ApprovalsModule {}
