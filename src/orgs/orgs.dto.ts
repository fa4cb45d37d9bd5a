import { ApiProperty } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, IsUUID, Length } from 'class-validator';
import { CanonicalUuid } from '../common/http/validation.js';

export class CreateOrgDto {
  @ApiProperty({ minLength: 1, maxLength: 200 })
  @IsString()
  @Length(1, 200)
  name!: string;

  @ApiProperty({ required: false, format: 'uuid', description: 'choose the id (e.g. to match your own system); generated when absent' })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  id?: string;
}

export class SetFeatureFlagDto {
  @ApiProperty()
  @IsBoolean()
  enabled!: boolean;

  @ApiProperty({ required: false, maxLength: 500 })
  @IsOptional()
  @IsString()
  @Length(0, 500)
  reason?: string;
}
