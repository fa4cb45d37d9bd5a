import { TOOL_FORMATS, type ToolFormat } from './tool-definitions.js';
import { ApiProperty } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsIn, IsObject, IsOptional, IsString, Matches } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { NoCredentialShape } from '../redaction/credential-shape.js';
import { NullAsAbsent } from '../common/http/validation.js';

export class CreateRunDto {
  @ApiProperty({
    example: 'support-specialist',
    pattern: '^[A-Za-z0-9._:-]{1,128}$',
    minLength: 1,
    maxLength: 128,
    description: 'who the agent acts as; permissions may target it',
  })
  @IsString()
  @Matches(/^[A-Za-z0-9._:-]{1,128}$/)
  @NoCredentialShape()
  specialistId!: string;

  @ApiProperty({ required: false, nullable: true, pattern: '^[\\x20-\\x7e]{1,200}$', minLength: 1, maxLength: 200, description: 'printable ASCII (blanks allowed); null: none, as absent' })
  @NullAsAbsent()
  @IsOptional()
  @IsString()
  @Matches(/^[\x20-\x7e]{1,200}$/)
  @NoCredentialShape()
  conversationId?: string;

  @ApiProperty({ required: false, nullable: true, type: Object, additionalProperties: true, description: 'free-form, at most 16 KiB of JSON; null: none, as absent' })
  @IsOptional()
  @IsObject()
  // As sent: class-transformer's copy would drop keys named like Object.prototype members (constructor, toString), at any depth.
  // Null is none (as absent).
  @Transform(({ obj }: { obj: { metadata?: unknown } }) => obj.metadata ?? undefined)
  metadata?: Record<string, unknown>;
}

export class ToolsQuery {
  @ApiProperty({ required: false, enum: TOOL_FORMATS, default: 'anthropic' })
  @IsOptional()
  @IsIn(TOOL_FORMATS)
  format?: ToolFormat;
}

export class EndRunDto {
  @ApiProperty({ required: false, nullable: true, maxLength: 500, description: 'null: none given, as absent. Why the run ended; shown on the run (`ended.reason`) and as the `decisionReason` of the approvals it rejects (the ledger event records only whether one was given and its SHA-256, `reasonDigest`)' })
  @NullAsAbsent()
  @IsOptional()
  @IsString()
  @CodePointLength(0, 500)
  reason?: string;
}
