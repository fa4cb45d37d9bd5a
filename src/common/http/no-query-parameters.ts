import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';
import { isEchoableFieldName, UNNAMED_UNKNOWN_FIELD } from '../echoable-field-name.js';
import { AppError } from '../errors/app-error.js';

const takesQuery = new WeakMap<object, boolean>();

/** Whether a route handler declares a query argument (@Query: a DTO the ValidationPipe judges, or a pipe of its own). */
export function declaresQuery(controller: object, handler: { name: string }): boolean {
  let known = takesQuery.get(handler);
  if (known === undefined) {
    const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, handler.name) ?? {}) as Record<string, unknown>;
    known = Object.keys(args).some((key) => key.split(':')[0] === String(RouteParamtypes.QUERY));
    takesQuery.set(handler, known);
  }
  return known;
}

/**
 * For a route that takes no query parameters at all (AuthGuard: every /v1 route that declares none, reads and
 * writes alike, so that `DELETE …?dryRun=true` is refused, not carried out): any parameter is refused with the
 * 400 VALIDATION_FAILED the global ValidationPipe answers for an unknown field of a query DTO (same detail and
 * `errors`). An empty DTO class cannot do it: with forbidUnknownValues, class-validator refuses every object of a
 * class that has no decorated property, even an empty query.
 */
export function refuseQueryParameters(query: unknown): void {
  const names = query !== null && typeof query === 'object' ? Object.keys(query) : [];
  if (names.length === 0) return;
  // A name that is no field name (a token pasted as a parameter) is never echoed (echoable-field-name.ts); the
  // global pipe's words for it, top-level ("query: …") as it says them of a query.
  const problems = names.map((name) => (isEchoableFieldName(name) ? `${name}: property ${name} should not exist` : `query: ${UNNAMED_UNKNOWN_FIELD}`));
  throw new AppError('VALIDATION_FAILED', problems.join('; '), { fields: { errors: problems } });
}
