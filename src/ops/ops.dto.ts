import { ApiProperty, IntersectionType } from '@nestjs/swagger';
import { PageQuery } from '../common/http/page-query.js';
import { IsIn, IsOptional, IsString, IsUUID, Matches } from 'class-validator';
import { CodePointLength } from '../common/http/code-point-length.js';
import { CORRELATION_ID } from '../common/http/correlation.js';
import { TOOL_CALL_STATUSES, type ToolCallStatus } from '../tool-calls/tool-call-status.js';
import { CanonicalUuid } from '../common/http/validation.js';
import { NIL_UUID } from '../common/ids.js';
import { LEDGER_EVENT_TYPES } from '../ledger/ledger-event-types.js';
import { ANCHOR_FORMAT } from '../ledger/ledger-verifier.service.js';

const TIME_DOC =
  'ISO-8601 timestamp (UTC when no zone is given; zone Z or ±hh:mm; a fraction finer than microseconds counts as the next microsecond up, as rows are kept to the microsecond); a start after the end is 400 VALIDATION_FAILED';

/** The time window of the ledger listings: `since` ≤ created_at < `until`. */
export class TimeWindowQuery {
  @ApiProperty({ required: false, description: `inclusive; ${TIME_DOC}` })
  @IsOptional()
  @IsString()
  since?: string;

  @ApiProperty({ required: false, description: `exclusive; ${TIME_DOC}` })
  @IsOptional()
  @IsString()
  until?: string;
}

/**
 * The cost of a listing over every org: the indexes lead with org_id (every org's own pages stay fast at any
 * size), so a filter few rows match, or none, is answered by reading the table through.
 */
const EVERY_ORG_SCAN_DOC = (filters: string) =>
  `Over every org, a filter on ${filters} that few rows match reads the whole table (the indexes lead with the org: about 0.1 s per 300k rows here); name the org for fast pages`;

/** The filters of the tool-call listing and the export (API.md §6). */
export class ToolCallFiltersQuery extends TimeWindowQuery {
  @ApiProperty({ required: false, format: 'uuid', description: `platform keys: one org, or every org when absent; org keys: their own org only (another → 404). ${EVERY_ORG_SCAN_DOC('toolName, action, status or errorCode')}` })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  orgId?: string;

  @ApiProperty({ required: false, format: 'uuid' })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  runId?: string;

  @ApiProperty({ required: false, enum: TOOL_CALL_STATUSES })
  @IsOptional()
  @IsIn(TOOL_CALL_STATUSES)
  status?: ToolCallStatus;

  @ApiProperty({ required: false, minLength: 1, maxLength: 200 })
  @IsOptional()
  @IsString()
  @CodePointLength(1, 200)
  toolName?: string;

  @ApiProperty({ required: false, minLength: 1, maxLength: 200 })
  @IsOptional()
  @IsString()
  @CodePointLength(1, 200)
  action?: string;

  @ApiProperty({ required: false, minLength: 1, maxLength: 100, example: 'VENDOR_TIMEOUT' })
  @IsOptional()
  @IsString()
  @CodePointLength(1, 100)
  errorCode?: string;

  @ApiProperty({ required: false, maxLength: 255, pattern: '^[\\x21-\\x7e]{1,255}$', description: 'an X-Correlation-Id as echoed: 1-255 printable ASCII, no blanks' })
  @IsOptional()
  @IsString()
  @Matches(CORRELATION_ID, { message: 'correlationId must be 1-255 printable ASCII characters without blanks, as X-Correlation-Id' })
  correlationId?: string;

}

export class ToolCallListQuery extends IntersectionType(ToolCallFiltersQuery, PageQuery) {}

export class ToolCallExportQuery extends ToolCallFiltersQuery {
  @ApiProperty({ enum: ['ndjson', 'csv'] })
  @IsIn(['ndjson', 'csv'])
  format!: 'ndjson' | 'csv';
}

/** The platform chain's id, as the ledger's orgId parameters document it. */
const PLATFORM_CHAIN_DOC = `platform keys may name ${NIL_UUID} for the platform chain (platform keys created and revoked, bootstrap keys retired); org keys never reach it (404)`;

export class LedgerEventsQuery extends IntersectionType(PageQuery, TimeWindowQuery) {
  @ApiProperty({ required: false, format: 'uuid', description: `platform keys: one org, or every org when absent; org keys: their own org only (another → 404). ${PLATFORM_CHAIN_DOC}. ${EVERY_ORG_SCAN_DOC('type')}` })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  orgId?: string;

  @ApiProperty({ required: false, format: 'uuid' })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  runId?: string;

  @ApiProperty({ required: false, enum: LEDGER_EVENT_TYPES, example: 'tool_call.requested', description: 'one of the types the gateway writes; another is 400 (it would match nothing)' })
  @IsOptional()
  @IsIn(LEDGER_EVENT_TYPES, { message: `type must be one of the ledger's event types: ${LEDGER_EVENT_TYPES.join(', ')}` })
  type?: string;
}

export class LedgerVerifyQuery {
  @ApiProperty({ required: false, format: 'uuid', description: `required for platform keys; org keys verify their own org (another → 404). ${PLATFORM_CHAIN_DOC}` })
  @IsOptional()
  @IsUUID('all')
  @CanonicalUuid()
  orgId?: string;

  @ApiProperty({
    required: false,
    example: '42:' + '0'.repeat(64),
    pattern: ANCHOR_FORMAT.source,
    description: "<chainSeq>:<hash>, an earlier verify's `checked` and `headHash` kept outside the database: the chain must still hold that hash there",
  })
  @IsOptional()
  @IsString()
  @Matches(ANCHOR_FORMAT, { message: 'anchor must be <chainSeq>:<hash>: a position from 1 (at most 15 digits) and a lowercase hex SHA-256, as an earlier verify answered checked and headHash' })
  anchor?: string;
}

export class UsageQuery {
  @ApiProperty({ required: false, description: `inclusive; ${TIME_DOC}` })
  @IsOptional()
  @IsString()
  from?: string;

  @ApiProperty({ required: false, description: `exclusive; ${TIME_DOC}` })
  @IsOptional()
  @IsString()
  to?: string;
}
