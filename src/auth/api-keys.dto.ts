import { ApiProperty, OmitType } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, IsUUID, Matches, Max, Min, ValidateIf } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { ROLES, type Role } from './api-key.entity.js';
import { PageQuery, toInt } from '../common/http/page-query.js';
import { CanonicalUuid } from '../common/http/validation.js';

/**
 * Page size of GET /v1/api-keys when `limit` is absent: the listing's maximum,
 * not the ledger listings' 50, because it answered every key of an org before it
 * was paginated and clients that do not follow nextCursor yet should still see
 * the whole list of any org with up to this many keys.
 */
export const API_KEYS_DEFAULT_PAGE = 200;
/** Largest `limit`: the same cap as every other keyset listing. */
export const API_KEYS_MAX_PAGE = 200;

/** Longest API key name (code points). */
export const API_KEY_NAME_MAX = 100;

export class CreateApiKeyDto {
  @ApiProperty({ type: String, nullable: true, format: 'uuid', description: 'the org the key belongs to; null = platform key (ops/admin only)' })
  @ValidateIf((o: CreateApiKeyDto) => o.orgId !== null)
  @IsUUID('all')
  @CanonicalUuid()
  orgId!: string | null;

  @ApiProperty({ enum: ROLES })
  @IsIn(ROLES)
  role!: Role;

  @ApiProperty({ minLength: 1, maxLength: API_KEY_NAME_MAX, description: 'kept redacted as a tool\'s input is (a card number or token in it is [REDACTED])' })
  @IsString()
  @CodePointLength(1, API_KEY_NAME_MAX)
  name!: string;
}

/** `orgId`, plus `cursor` as in every keyset listing and `limit` with this listing's default (newest first). */
export class ListApiKeysQuery extends OmitType(PageQuery, ['limit'] as const) {
  @ApiProperty({ type: 'integer', required: false, minimum: 1, maximum: API_KEYS_MAX_PAGE, default: API_KEYS_DEFAULT_PAGE })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(API_KEYS_MAX_PAGE)
  limit?: number;

  @ApiProperty({
    required: false,
    minLength: 1,
    maxLength: 64,
    pattern: '^(?:platform|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$',
    description: 'platform admins: an org id, "platform" for platform keys, or absent for every key; org admins: their own org only (another → 404)',
  })
  @IsOptional()
  @IsString()
  @CodePointLength(1, 64)
  // An org id or "platform": anything else is a bad filter (400), as on every other listing, not an unknown org.
  @Matches(/^(?:platform|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/, { message: 'orgId must be an org id (UUID) or "platform"' })
  @CanonicalUuid()
  orgId?: string;
}
