import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { AppError } from '../errors/app-error.js';
import { canonicalUuid } from '../ids.js';

function describe(errors: ValidationError[], parent = ''): string[] {
  const out: string[] = [];
  for (const e of errors) {
    const path = parent ? `${parent}.${e.property}` : e.property;
    for (const msg of Object.values(e.constraints ?? {})) out.push(`${path}: ${msg}`);
    if (e.children?.length) out.push(...describe(e.children, path));
  }
  return out;
}

/** Whitelists, rejects unknown fields, transforms types; 400 VALIDATION_FAILED naming every bad field. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    forbidUnknownValues: true,
    exceptionFactory: (errors) => {
      const problems = describe(errors);
      return new AppError('VALIDATION_FAILED', problems.join('; ') || 'invalid request', { fields: { errors: problems } });
    },
  });
}

/** A UUID field of a query or body in its canonical lower-case spelling (see canonicalUuid); anything else is left for the validators to judge. */
export const CanonicalUuid = (): PropertyDecorator => Transform(({ value }: { value: unknown }) => canonicalUuid(value));
