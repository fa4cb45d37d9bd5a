import { ValidationPipe, type ArgumentMetadata, type ValidationError } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { getMetadataStorage } from 'class-validator';
import { isEchoableFieldName, UNNAMED_UNKNOWN_FIELD } from '../echoable-field-name.js';
import { AppError } from '../errors/app-error.js';
import { canonicalUuid } from '../ids.js';

/** What a 400 names when the bad field has no name it may echo: the body (a query's are renamed, queryNamed). */
const BODY_ROOT = 'body';
const UNNAMED_INVALID_FIELD = 'a field not named here is invalid';

/**
 * class-validator rules on what a value is (present, of a type). One of them failing makes every rule on what the value
 * holds fail too, falsely ("limit=1.5": "must not be greater than 200; must not be less than 1; must be an integer
 * number"; no `items` at all: "must contain no more than 1000 elements"): a 400 names only the rule the value breaks.
 */
const TYPE_RULES = new Set(['isDefined', 'isInt', 'isNumber', 'isArray', 'isString', 'isBoolean', 'isObject']);

/**
 * The constraints a 400 reports: a value that is absent or no array is told only that (a rule on "each value in" it
 * means nothing then); else the type rules that failed if any did; else every one that failed.
 */
function reported(constraints: Record<string, string>): [string, string][] {
  const all = Object.entries(constraints);
  for (const first of ['isDefined', 'isArray']) {
    const only = all.filter(([rule]) => rule === first);
    if (only.length > 0) return only;
  }
  const typeOnly = all.filter(([rule]) => TYPE_RULES.has(rule));
  return typeOnly.length > 0 ? typeOnly : all;
}

function describe(errors: ValidationError[], parent = ''): string[] {
  const out: string[] = [];
  for (const e of errors) {
    // A key that is no field name (a token pasted as a key) is never echoed: it may be a secret (echoable-field-name.ts).
    const named = isEchoableFieldName(e.property) || /^\d{1,6}$/.test(e.property);
    const path = named ? (parent ? `${parent}.${e.property}` : e.property) : parent || BODY_ROOT;
    for (const [rule, msg] of reported(e.constraints ?? {})) {
      const unnamed = rule === 'whitelistValidation' ? UNNAMED_UNKNOWN_FIELD : UNNAMED_INVALID_FIELD;
      out.push(`${path}: ${named ? msg : unnamed}`);
    }
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

/**
 * A body key as one segment of a path a 400 names: free-form JSON (a run's metadata) may hold any key, a token
 * pasted as one too, so a key that does not look like a field name is a placeholder; the path still says where.
 */
const keySegment = (k: string): string => (isEchoableFieldName(k) ? k : '<a key>');

/** The path of the first key Nest would strip, at any depth (JSON bodies are at most 32 deep), or undefined. */
function strippedKeyPath(value: unknown, path: string, depth: number): string | undefined {
  if (typeof value !== 'object' || value === null || depth > 64) return undefined;
  for (const [k, v] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${keySegment(k)}` : keySegment(k);
    if (!Array.isArray(value) && STRIPPED.has(k)) return at;
    const inner = strippedKeyPath(v, at, depth + 1);
    if (inner !== undefined) return inner;
  }
  return undefined;
}

/**
 * Prototype-named fields of the raw body that the DTO instance `dto`, or a DTO instance nested in it (a class other
 * than Object, with validation metadata: tool-permission items), does not declare, by path. Walks the DTO and the
 * raw value side by side; free-form JSON (plain objects, such as a run's metadata) is not judged.
 */
function hiddenFields(raw: unknown, dto: unknown, path: string, depth: number): string[] {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || typeof dto !== 'object' || dto === null || depth > 16) return [];
  if (Array.isArray(dto) || dto.constructor === Object) return [];
  const known = declaredProperties(dto.constructor);
  if (known.size === 0) return [];
  const out: string[] = [];
  for (const name of Object.keys(raw)) {
    if (PROTOTYPE_NAMES.has(name) && !known.has(name)) out.push(`${path ? `${path}.${name}` : name}: property ${name} should not exist`);
  }
  // `name` above is one of PROTOTYPE_NAMES (fixed, never a secret); `k` is a property of a DTO instance, so declared
  // and safe to name, but the path takes keySegment like every other path built from body keys.
  for (const [k, v] of Object.entries(dto)) {
    const rawV = (raw as Record<string, unknown>)[k];
    const at = path ? `${path}.${keySegment(k)}` : keySegment(k);
    if (Array.isArray(v) && Array.isArray(rawV)) v.forEach((item, i) => out.push(...hiddenFields(rawV[i], item, `${at}.${i}`, depth + 1)));
    else out.push(...hiddenFields(rawV, v, at, depth + 1));
  }
  return out;
}

/**
 * ValidationPipe, plus: a body or query field named like an Object.prototype member (`toString`, `constructor`)
 * that the DTO (or a DTO nested in it) does not declare is refused as every other unknown field is, instead of
 * slipping through unseen; and a `constructor`, `prototype` or `__proto__` key anywhere (which Nest would strip
 * without a word) is refused too.
 */
class StrictValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type !== 'query') return this.strictTransform(value, metadata);
    return this.strictTransform(value, metadata).catch((e: unknown) => {
      throw queryNamed(e);
    });
  }

  private async strictTransform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const { metatype, type } = metadata;
    const judged = (type === 'body' || type === 'query') && typeof metatype === 'function' && declaredProperties(metatype).size > 0;
    // A JSON body that is no object (an array, a string, a number, a boolean): said so, the same on every route (Nest
    // answered "Validation failed (object is expected)" to a scalar, and "0: property 0 should not exist" to an array).
    // No body, or JSON null, is an empty object: every field absent.
    if (judged && type === 'body' && value !== undefined && value !== null && (typeof value !== 'object' || Array.isArray(value))) {
      throw validationFailed([`${BODY_ROOT}: must be a JSON object, not ${Array.isArray(value) ? 'an array' : `a ${typeof value}`}`]);
    }
    if (!judged || typeof value !== 'object' || value === null || Array.isArray(value)) return super.transform(value, metadata);
    if (type === 'query') {
      // `?limit=1&limit=2` reaches here as an array (the simple query parser), which every rule of a one-value
      // parameter then refused at once ("must not be greater than 200; … less than 1; … an integer").
      const known = declaredProperties(metatype);
      for (const [k, v] of Object.entries(value)) {
        if (Array.isArray(v) && known.has(k)) throw validationFailed([`${k}: give it once (it was sent ${v.length} times)`]);
      }
    }
    // Before transforming: Nest deletes these keys at every depth (they are how prototypes get polluted), which in
    // free-form JSON (a run's metadata) silently lost data.
    const stripped = strippedKeyPath(value, '', 0);
    if (stripped !== undefined) {
      const problem = PROTOTYPE_NAMES.has(stripped) ? `${stripped}: property ${stripped} should not exist` : `${stripped}: keys named "constructor", "prototype" or "__proto__" are not accepted`;
      throw new AppError('VALIDATION_FAILED', problem, { fields: { errors: [problem] } });
    }
    const dto: unknown = await super.transform(value, metadata);
    const hidden = hiddenFields(value, dto, '', 0);
    if (hidden.length > 0) throw new AppError('VALIDATION_FAILED', hidden.join('; '), { fields: { errors: hidden } });
    return dto;
  }
}

const validationFailed = (problems: string[]): AppError =>
  new AppError('VALIDATION_FAILED', problems.join('; ') || 'invalid request', { fields: { errors: problems } });

/** A query's 400 says "query" where a body's says "body" (a `?status[]=x` key is named neither: it may be a pasted secret). */
function queryNamed(e: unknown): unknown {
  if (!(e instanceof AppError) || e.code !== 'VALIDATION_FAILED') return e;
  const errors = (e.extra.fields as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(errors)) return e;
  // Only the root fallback of describe() (a key it may not name): a parameter really named `body` keeps its name.
  const unnamed = new Set([UNNAMED_UNKNOWN_FIELD, UNNAMED_INVALID_FIELD].map((m) => `${BODY_ROOT}: ${m}`));
  return validationFailed(errors.map((p) => (typeof p === 'string' && unnamed.has(p) ? `query${p.slice(BODY_ROOT.length)}` : String(p))));
}

/** Whitelists, rejects unknown fields, transforms types; 400 VALIDATION_FAILED naming every bad field. */
export function createValidationPipe(): ValidationPipe {
  return new StrictValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    forbidUnknownValues: true,
    exceptionFactory: (errors) => validationFailed(describe(errors)),
  });
}

/** A UUID field of a query or body in its canonical lower-case spelling (see canonicalUuid); anything else is left for the validators to judge. */
export const CanonicalUuid = (): PropertyDecorator => Transform(({ value }: { value: unknown }) => canonicalUuid(value));

/**
 * An optional body field that takes `null` as "not given" (documented `nullable: true`): null becomes absent before it
 * is judged, so the handler never sees it. Without it @IsOptional let a null through to the handler, which took it
 * for a value (an approval's `reason: null` was stored as the text "null").
 */
export const NullAsAbsent = (): PropertyDecorator => Transform(({ value }: { value: unknown }) => (value === null ? undefined : value));
