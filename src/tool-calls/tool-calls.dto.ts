import { ApiProperty } from '@nestjs/swagger';
import { Allow } from 'class-validator';

/**
 * The query of GET /v1/tool-calls/{id}/result. A DTO like every other route's, so that an unknown
 * parameter (a typo such as `waitms`) is 400 VALIDATION_FAILED instead of silently skipping the long-poll.
 * `waitMs` itself is judged by ToolCallResultsService (one place, one message: "waitMs: an integer from 0 to 30000").
 */
export class ToolCallResultQuery {
  @ApiProperty({ required: false, type: 'integer', minimum: 0, maximum: 30_000, description: '0-30000: long-poll while the call is waiting for approval or running' })
  @Allow()
  waitMs?: string;
}
