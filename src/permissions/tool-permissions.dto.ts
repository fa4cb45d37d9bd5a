import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsBoolean, IsObject, IsString, Matches, ValidateIf, ValidateNested } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { NoCredentialShape } from '../redaction/credential-shape.js';

export class ToolPermissionDto {
  @ApiProperty({ example: 'order_lookup', minLength: 1, maxLength: 100 })
  @IsString()
  @CodePointLength(1, 100)
  toolName!: string;

  @ApiProperty({ example: 'lookup', minLength: 1, maxLength: 100 })
  @IsString()
  @CodePointLength(1, 100)
  action!: string;

  @ApiProperty({
    type: String,
    nullable: true,
    pattern: '^[A-Za-z0-9._:-]{1,128}$',
    minLength: 1,
    maxLength: 128,
    description: 'required: a run’s specialistId, or null = every specialist of the org; a specialist row overrides the org-wide one. As a run’s, it must not have the shape of an access token or key (400)',
  })
  // Required (API.md §2): left out, it is refused, not taken as null — a forgotten field must not grant every specialist.
  // (Matches also refuses a non-string; one message each way.)
  @ValidateIf((o: ToolPermissionDto) => o.specialistId !== null)
  @Matches(/^[A-Za-z0-9._:-]{1,128}$/, {
    message: ({ value }) =>
      value === undefined
        ? 'required: a specialist id, or null for a row that applies to every specialist of the org'
        : 'specialistId must match /^[A-Za-z0-9._:-]{1,128}$/ regular expression (or be null: every specialist of the org)',
  })
  // As a run's specialistId: a row for an id no run can have would never apply, and a token pasted here would be stored and shown.
  @NoCredentialShape()
  specialistId!: string | null;

  @ApiProperty()
  @IsBoolean()
  enabled!: boolean;
}

/** What validation allows; the 64 KiB admin body limit (413) is reached first by rows of a realistic size. */
const MAX_ITEMS = 1000;

export class PutToolPermissionsDto {
  @ApiProperty({
    type: [ToolPermissionDto],
    maxItems: MAX_ITEMS,
    description:
      `every row of the org (they replace all earlier ones); at most ${MAX_ITEMS}, but in practice the 64 KiB limit on admin bodies ` +
      '(413 PAYLOAD_TOO_LARGE) caps it first: about 700 rows of typical size (~95 bytes, a specialistId like "specialist-0001"), ' +
      'about 800 org-wide rows (specialistId null)',
  })
  @IsArray()
  @ArrayMaxSize(MAX_ITEMS)
  // Each item an object: a nested array ([[{...}]]) would get past ValidateNested and be judged as "undefined.undefined".
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => ToolPermissionDto)
  items!: ToolPermissionDto[];
}
