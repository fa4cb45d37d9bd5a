import { ApiProperty } from '@nestjs/swagger';
import { PageQuery } from '../common/http/page-query.js';
import { IsIn, IsOptional, IsString, IsUUID, Matches } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { CanonicalUuid, NullAsAbsent } from '../common/http/validation.js';


export class DecideApprovalDto {
  @ApiProperty({ enum: ['approve', 'reject'] })
  @IsIn(['approve', 'reject'])
  decision!: 'approve' | 'reject';

  @ApiProperty({
    pattern: '^[0-9a-f]{64}$',
    minLength: 64,
    maxLength: 64,
    description: 'the actionDigest shown by GET /v1/approvals/:id, lower-case hex as shown: proves what exactly is being approved',
  })
  @IsString()
  @Matches(/^[0-9a-f]{64}$/)
  actionDigest!: string;

  @ApiProperty({ required: false, nullable: true, maxLength: 1000, description: 'why; null: none given, as absent. A rejection quotes it (redacted) in the tool_result content of its call, for the model' })
  @NullAsAbsent()
  @IsOptional()
  @IsString()
  @CodePointLength(0, 1000)
  reason?: string;
}

export class ListApprovalsQuery extends PageQuery {
  @ApiProperty({ required: false, enum: ['pending', 'approved', 'rejected', 'expired'] })
  @IsOptional()
  @IsIn(['pending', 'approved', 'rejected', 'expired'])
  status?: 'pending' | 'approved' | 'rejected' | 'expired';

  @ApiProperty({ required: false, enum: ['expert', 'client'] })
  @IsOptional()
  @IsIn(['expert', 'client'])
  kind?: 'expert' | 'client';

  @ApiProperty({ required: false, format: 'uuid', description: 'platform keys: the org to list; org keys: their own org only (another → 404)' })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  orgId?: string;

  @ApiProperty({ required: false, format: 'uuid' })
  @IsOptional()
  @IsString()
  @CanonicalUuid()
  runId?: string;

}

export class ReconcileDto {
  @ApiProperty({ enum: ['succeeded', 'failed'] })
  @IsIn(['succeeded', 'failed'])
  status!: 'succeeded' | 'failed';

  @ApiProperty({ minLength: 1, maxLength: 2000, description: 'what ops found at the vendor' })
  @IsString()
  @CodePointLength(1, 2000)
  note!: string;
}
