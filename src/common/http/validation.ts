import { ValidationPipe, type ArgumentMetadata, type ValidationError } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { getMetadataStorage } from 'class-validator';
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

/**
 * Names class-transformer never copies from the request onto the DTO (they are already functions of every
 * object: constructor, toString, hasOwnProperty, … and __proto__), so the whitelist never sees them either.
 */
const PROTOTYPE_NAMES = new Set([...Object.getOwnPropertyNames(Object.prototype), '__proto__']);

/** The properties a DTO class declares (validated), cached per class. */
const declared = new WeakMap<object, ReadonlySet<string>>();
function declaredProperties(metatype: object): ReadonlySet<string> {
  let names = declared.get(metatype);
  if (!names) {
    const metas = getMetadataStorage().getTargetValidationMetadatas(metatype as new () => object, '', true, false);
    names = new Set(metas.map((m) => m.propertyName));
    declared.set(metatype, names);
  }
  return names;
}

/** The keys Nest's ValidationPipe deletes at every depth before transforming (@nestjs/common strip-proto-keys). */
const STRIPPED = new Set(['constructor', '__proto__', 'prototype']);

/** The path of the first key Nest would strip, at any depth (JSON bodies are at most 32 deep), or undefined. */
function strippedKeyPath(value: unknown, path: string, depth: number): string | undefined {
  if (typeof value !== 'object' || value === null || depth > 64) return undefined;
  for (const [k, v] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
    if (!Array.isArray(value) && STRIPPED.has(k)) return at;
    const inner = strippedKeyPath(v, at, depth + 1);
    if (inner !== undefined) return inner;
  }
  return undefined;
}

/**
 * Prototype-named fields of the raw body that the nested DTO instances (class instances other than Object, with
 * validation metadata) below `dto` do not declare, by path. Walks the DTO and the raw value side by side.
 */
function hiddenNested(raw: unknown, dto: unknown, path: string, depth: number): string[] {
  if (typeof raw !== 'object' || raw === null || typeof dto !== 'object' || dto === null || depth > 16) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(dto)) {
    const rawV = (raw as Record<string, unknown>)[k];
    const at = path ? `${path}.${k}` : k;
    const items: [unknown, unknown, string][] = Array.isArray(v) && Array.isArray(rawV) ? v.map((item, i) => [item, rawV[i], `${at}.${i}`]) : [[v, rawV, at]];
    for (const [item, rawItem, itemPath] of items) {
      if (typeof item !== 'object' || item === null || Array.isArray(item) || item.constructor === Object) continue;
      if (typeof rawItem !== 'object' || rawItem === null || Array.isArray(rawItem)) continue;
      const known = declaredProperties(item.constructor);
      if (known.size === 0) continue;
      for (const name of Object.keys(rawItem)) {
        if (PROTOTYPE_NAMES.has(name) && !known.has(name)) out.push(`${itemPath}.${name}: property ${name} should not exist`);
      }
      out.push(...hiddenNested(rawItem, item, itemPath, depth + 1));
    }
  }
  return out;
}

/**
 * ValidationPipe, plus: a body or query field named like an Object.prototype member (`toString`, `constructor`)
 * that the DTO does not declare is refused as every other unknown field is, instead of slipping through unseen;
 * and a `constructor` or `__proto__` key deeper down (which Nest would strip without a word) is refused too.
 */
class StrictValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const { metatype, type } = metadata;
    if ((type === 'body' || type === 'query') && typeof metatype === 'function' && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const known = declaredProperties(metatype);
      if (known.size > 0) {
        const hidden = Object.keys(value).filter((k) => PROTOTYPE_NAMES.has(k) && !known.has(k));
        const problems = hidden.map((k) => `${k}: property ${k} should not exist`);
        // Nest deletes constructor, prototype and __proto__ at every depth before transforming (they are how prototypes
        // get polluted): in free-form JSON (a run's metadata) that silently lost data. Refused instead, by path.
        const stripped = hidden.length > 0 ? undefined : strippedKeyPath(value, '', 0);
        if (stripped !== undefined) problems.push(`${stripped}: keys named "constructor", "prototype" or "__proto__" are not accepted`);
        if (problems.length > 0) throw new AppError('VALIDATION_FAILED', problems.join('; '), { fields: { errors: problems } });
        const dto: unknown = await super.transform(value, metadata);
        // Nested DTOs (tool-permission items) too: their unknown prototype-named fields were as invisible.
        const nested = hiddenNested(value, dto, '', 0);
        if (nested.length > 0) throw new AppError('VALIDATION_FAILED', nested.join('; '), { fields: { errors: nested } });
        return dto;
      }
    }
    return super.transform(value, metadata);
  }
}

/** Whitelists, rejects unknown fields, transforms types; 400 VALIDATION_FAILED naming every bad field. */
export function createValidationPipe(): ValidationPipe {
  return new StrictValidationPipe({
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
