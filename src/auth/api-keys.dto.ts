import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, IsUUID, Length, ValidateIf } from 'class-validator';
import { ROLES, type Role } from './api-key.entity.js';
import { CanonicalUuid } from '../common/http/validation.js';

export class CreateApiKeyDto {
  @ApiProperty({ type: String, nullable: true, format: 'uuid', description: 'the org the key belongs to; null = platform key (ops/admin only)' })
  @ValidateIf((o: CreateApiKeyDto) => o.orgId !== null)
  @IsUUID('all')
  @CanonicalUuid()
  orgId!: string | null;

  @ApiProperty({ enum: ROLES })
  @IsIn(ROLES)
  role!: Role;

  @ApiProperty({ minLength: 1, maxLength: 100 })
  @IsString()
  @Length(1, 100)
  name!: string;
}

export class ListApiKeysQuery {
  @ApiProperty({ required: false, description: 'org id, or "platform" for platform keys (platform admins)' })
  @IsOptional()
  @IsString()
  @Length(1, 64)
  @CanonicalUuid()
  orgId?: string;
}
