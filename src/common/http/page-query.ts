import { ApiProperty } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { CodePointLength } from './code-point-length.js';

/** Only a plain decimal integer is a number here: "1e2", "0x10" and " 5" stay strings and fail @IsInt. */
export const toInt = ({ value }: { value: unknown }): unknown => (typeof value === 'string' && /^-?\d{1,9}$/.test(value) ? Number(value) : value);

/** `limit` and `cursor` of every keyset-paginated listing. */
export class PageQuery {
  @ApiProperty({ type: 'integer', required: false, minimum: 1, maximum: 200, default: 50 })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(200)
  limit?: number;

  @ApiProperty({ required: false, minLength: 1, maxLength: 1024, description: 'nextCursor of the previous page, with the same filters' })
  @IsOptional()
  @IsString()
  @CodePointLength(1, 1024)
  cursor?: string;
}
