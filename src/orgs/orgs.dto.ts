import { ApiProperty } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, IsUUID, NotEquals } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { NIL_UUID } from '../common/ids.js';
import { CanonicalUuid } from '../common/http/validation.js';

/** Longest org name, and longest flag reason (code points). */
export const ORG_NAME_MAX = 200;
export const FLAG_REASON_MAX = 500;

export class CreateOrgDto {
  @ApiProperty({ minLength: 1, maxLength: ORG_NAME_MAX, description: 'kept redacted as a tool\'s input is (a card number or token in it is [REDACTED])' })
  @IsString()
  @CodePointLength(1, ORG_NAME_MAX)
  name!: string;

  @ApiProperty({
    type: String,
    required: false,
    nullable: true,
    format: 'uuid',
    description:
      'choose the id (e.g. to match your own system); generated when absent or null. The nil UUID is reserved (platform-level audit events are filed under it)',
  })
  @IsOptional()
  @IsUUID('all')
  @NotEquals(NIL_UUID, { message: 'the nil UUID 00000000-0000-0000-0000-000000000000 is reserved for platform-level events and cannot be an org id' })
  @CanonicalUuid()
  id?: string | null;
}

export class SetFeatureFlagDto {
  @ApiProperty()
  @IsBoolean()
  enabled!: boolean;

  @ApiProperty({ type: String, required: false, nullable: true, maxLength: FLAG_REASON_MAX, description: 'why, kept with the flag until the next change, redacted as a tool\'s input is (a card number or token in it is [REDACTED]); its feature_flag.changed event records the SHA-256 of what is kept (reasonDigest). Absent, null or empty: none given' })
  @IsOptional()
  @IsString()
  @CodePointLength(0, FLAG_REASON_MAX)
  reason?: string | null;
}
