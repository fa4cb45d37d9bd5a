import { ApiProperty } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, IsUUID, Length, NotEquals } from 'class-validator';
import { NIL_UUID } from '../common/ids.js';
import { CanonicalUuid } from '../common/http/validation.js';

export class CreateOrgDto {
  @ApiProperty({ minLength: 1, maxLength: 200 })
  @IsString()
  @Length(1, 200)
  name!: string;

  @ApiProperty({
    required: false,
    format: 'uuid',
    description: 'choose the id (e.g. to match your own system); generated when absent. The nil UUID is reserved (platform-level audit events are filed under it)',
  })
  @IsOptional()
  @IsUUID('all')
  @NotEquals(NIL_UUID, { message: 'the nil UUID 00000000-0000-0000-0000-000000000000 is reserved for platform-level events and cannot be an org id' })
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
