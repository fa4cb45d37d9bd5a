import { Injectable, type PipeTransform } from '@nestjs/common';
import { isEchoableFieldName, UNNAMED_UNKNOWN_FIELD } from '../echoable-field-name.js';
import { AppError } from '../errors/app-error.js';

/**
 * For a route that takes no query parameters at all (GET /v1/tools): any parameter is refused with
 * the 400 VALIDATION_FAILED the global ValidationPipe answers for an unknown field of a query DTO
 * (same detail and `errors`). An empty DTO class cannot do it: with forbidUnknownValues, class-validator
 * refuses every object of a class that has no decorated property, even an empty query.
 */
@Injectable()
export class NoQueryParameters implements PipeTransform<unknown, Record<string, never>> {
  transform(value: unknown): Record<string, never> {
    const names = value !== null && typeof value === 'object' ? Object.keys(value) : [];
    if (names.length === 0) return {};
    // A name that is no field name (a token pasted as a parameter) is never echoed (echoable-field-name.ts); the
    // global pipe's words for it, top-level ("query: …") as it says them of a query.
    const problems = names.map((name) => (isEchoableFieldName(name) ? `${name}: property ${name} should not exist` : `query: ${UNNAMED_UNKNOWN_FIELD}`));
    throw new AppError('VALIDATION_FAILED', problems.join('; '), { fields: { errors: problems } });
  }
}
