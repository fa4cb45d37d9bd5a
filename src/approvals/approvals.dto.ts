import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsInt, IsOptional, IsString, Length, Matches, Max, Min } from 'class-validator';
import { Transform } from 'class-transformer';

/** Strict integer parsing, as the ledger listings do: "1e2", "0x10", " 5" and "" stay invalid instead of becoming numbers. */
const toInt = ({ value }: { value: unknown }): unknown => (typeof value === 'string' && /^-?\d{1,9}$/.test(value) ? Number(value) : value);

export class DecideApprovalDto {
  @ApiProperty({ enum: ['approve', 'reject'] })
  @IsIn(['approve', 'reject'])
  decision!: 'approve' | 'reject';

  @ApiProperty({ description: 'the actionDigest shown by GET /v1/approvals/:id: proves what exactly is being approved' })
  @IsString()
  @Matches(/^[0-9a-f]{64}$/)
  actionDigest!: string;

  @ApiProperty({ required: false, maxLength: 1000 })
  @IsOptional()
  @IsString()
  @Length(0, 1000)
  reason?: string;
}

export class ListApprovalsQuery {
  @ApiProperty({ required: false, enum: ['pending', 'approved', 'rejected', 'expired'] })
  @IsOptional()
  @IsIn(['pending', 'approved', 'rejected', 'expired'])
  status?: 'pending' | 'approved' | 'rejected' | 'expired';

  @ApiProperty({ required: false, enum: ['expert', 'client'] })
  @IsOptional()
  @IsIn(['expert', 'client'])
  kind?: 'expert' | 'client';

  @ApiProperty({ required: false, format: 'uuid', description: 'platform keys: the org to list' })
  @IsOptional()
  @IsString()
  orgId?: string;

  @ApiProperty({ required: false, format: 'uuid' })
  @IsOptional()
  @IsString()
  runId?: string;

  @ApiProperty({ required: false, minimum: 1, maximum: 200, default: 50 })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(200)
  limit?: number;

  @ApiProperty({ required: false })
  @IsOptional()
  @IsString()
  @Length(1, 2000)
  cursor?: string;
}

export class ReconcileDto {
  @ApiProperty({ enum: ['succeeded', 'failed'] })
  @IsIn(['succeeded', 'failed'])
  status!: 'succeeded' | 'failed';

  @ApiProperty({ minLength: 1, maxLength: 2000, description: 'what ops found at the vendor' })
  @IsString()
  @Length(1, 2000)
  note!: string;
}
