import { ValidateBy, type ValidationArguments, type ValidationOptions } from 'class-validator';

/** A string's length in Unicode code points: what PostgreSQL's length() and a JSON Schema maxLength count. */
export function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--; // a surrogate pair is one code point
        i++;
      }
    }
  }
  return n;
}

/** The longest head of `s` of at most `n` code points: a cut there never splits a surrogate pair. */
export function headCodePoints(s: string, n: number): string {
  let i = 0;
  for (let kept = 0; kept < n && i < s.length; kept++) {
    const c = s.charCodeAt(i);
    const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    i += c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff ? 2 : 1;
  }
  return s.slice(0, i);
}

/**
 * `s` cut to at most `max` code points, "…" marking a cut (one of the `max`): counted and cut as the ops filters and
 * the length limits count, so an emoji is one and a cut never splits it into a U+FFFD.
 */
export function cutToCodePoints(s: string, max: number): string {
  return s.length <= max || codePoints(s) <= max ? s : `${headCodePoints(s, max - 1)}…`;
}

/**
 * class-validator's @Length, counted in code points. Its own (validator.js isLength) does not count a variation
 * selector (U+FE0E, U+FE0F) after a character, so a name of 200 letters and a selector passed @Length(1, 200), and
 * then the column's CHECK (length(name) BETWEEN 1 AND 200) refused it: a 500. The OpenAPI maxLength counts code
 * points too. The messages are @Length's (and @MaxLength's when `min` is 0).
 */
export function CodePointLength(min: number, max: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'codePointLength',
      constraints: [min, max],
      validator: {
        validate: (value: unknown) => {
          if (typeof value !== 'string') return false;
          const n = codePoints(value);
          return n >= min && n <= max;
        },
        // Asked only of a value that failed: not a string, too short or too long.
        defaultMessage: (args?: ValidationArguments) => {
          const property = args?.property ?? 'value';
          const short = min > 0 && (typeof args?.value !== 'string' || codePoints(args.value) < min);
          return short ? `${property} must be longer than or equal to ${min} characters` : `${property} must be shorter than or equal to ${max} characters`;
        },
      },
    },
    options,
  );
}
