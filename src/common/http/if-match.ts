import { createHash } from 'node:crypto';
import { AppError } from '../errors/app-error.js';

/**
 * Optimistic concurrency for the PUTs that replace a whole set (tool permissions, policies): GET answers an ETag,
 * and a PUT sent with `If-Match: <that ETag>` is refused 412 PRECONDITION_FAILED, nothing written, when the set
 * changed since (another admin's PUT in between), instead of silently undoing that change. Without If-Match the
 * last PUT wins, as before. RFC 9110 §13.1.1: `*`, or a list of entity tags compared strongly (a weak tag never
 * matches); a header that is neither is 400.
 */
export type IfMatch = { any: true } | { tags: string[] };

/** etagc (RFC 9110 §8.8.3): a comma and obs-text (0x80-0xFF, as Node hands a header's bytes) included. */
const OPAQUE_TAG = /^[\x21\x23-\x7e\x80-\xff]*$/;
const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t';

/** The If-Match header as sent (Node joins repeated fields with ", "), or undefined when absent. */
export function parseIfMatch(header: string | string[] | undefined): IfMatch | undefined {
  return parseTagList(header, 'If-Match');
}

/**
 * The tag list of If-None-Match (RFC 9110 §13.1.2), weak tags kept as their opaque part: it compares weakly, so
 * `W/"3"` names the tag `"3"`. `*` is { any: true } (ConditionalWritesGuard refuses it on every write first).
 */
export function parseIfNoneMatch(header: string | string[] | undefined): IfMatch | undefined {
  return parseTagList(header, 'If-None-Match');
}

/** Whether the field is `*` with SP/HTAB around it at most. */
function isStar(text: string): boolean {
  let start = 0;
  let end = text.length;
  while (start < end && isBlank(text[start])) start++;
  while (end > start && isBlank(text[end - 1])) end--;
  return end - start === 1 && text[start] === '*';
}

function parseTagList(header: string | string[] | undefined, field: 'If-Match' | 'If-None-Match'): IfMatch | undefined {
  if (header === undefined) return undefined;
  const malformed = (): AppError => new AppError('BAD_REQUEST', `${field} must be * or a list of entity tags as ETag answers them ("…")`);
  const text = Array.isArray(header) ? header.join(', ') : header;
  // Only SP and HTAB are blanks here (RFC 9110 §5.6.3): trim() would also take U+00A0 (a 0xA0 byte, as Node hands it),
  // and "<0xA0>*" — malformed — would turn the check off. Walked from both ends: the regex /[ \t]+$/ tried every blank
  // of a long inner run to the run's end (a 16 KiB header of blanks between two letters took 250 ms, 64 KiB 4 s).
  if (isStar(text)) return { any: true };
  const tags: string[] = [];
  // A scan, not a split on commas: a comma may stand inside a tag ("v1,old").
  let i = 0;
  for (;;) {
    while (i < text.length && (isBlank(text[i]) || text[i] === ',')) i++; // blanks, separators, empty list elements (§5.6.1)
    if (i >= text.length) break;
    const weak = text.startsWith('W/', i);
    if (weak) i += 2;
    if (text[i] !== '"') throw malformed();
    const end = text.indexOf('"', i + 1);
    if (end < 0) throw malformed();
    const tag = text.slice(i + 1, end);
    if (!OPAQUE_TAG.test(tag)) throw malformed();
    i = end + 1;
    while (isBlank(text[i])) i++;
    if (i < text.length && text[i] !== ',') throw malformed(); // two tags must be separated by a comma
    if (!weak || field === 'If-None-Match') tags.push(tag); // If-Match compares strongly: a weak tag never matches
  }
  // No tag at all (an empty field, or only commas) is a list of none (RFC 9110 §5.6.1): it matches nothing, so 412.
  return { tags };
}


/** 412 PRECONDITION_FAILED (with the current ETag) unless the condition holds for the set's current tag (no condition always holds). */
export function assertIfMatch(cond: IfMatch | undefined, current: string): void {
  if (cond === undefined || 'any' in cond || cond.tags.includes(current)) return;
  throw new AppError('PRECONDITION_FAILED', 'the set changed since the ETag sent in If-Match was read (another change came first): nothing was written; read it again and send the change against it', {
    headers: { ETag: quoted(current) },
  });
}

/** A whole-set PUT's preconditions: If-Match, then If-None-Match (RFC 9110 §13.2.2 order). */
export interface Preconditions {
  ifMatch?: IfMatch;
  ifNoneMatch?: IfMatch;
}

/** Both headers parsed (a malformed one is 400), or undefined when neither was sent. */
export function parsePreconditions(ifMatch: string | string[] | undefined, ifNoneMatch: string | string[] | undefined): Preconditions | undefined {
  if (ifMatch === undefined && ifNoneMatch === undefined) return undefined;
  return { ifMatch: parseIfMatch(ifMatch), ifNoneMatch: parseIfNoneMatch(ifNoneMatch) };
}

/**
 * 412 PRECONDITION_FAILED (with the current ETag) unless both hold for the set's current tag: If-Match names it (or is
 * `*`), and If-None-Match does not (`*` never holds: the set always has a representation, `{rules: [], version: 0}`).
 */
export function assertPreconditions(p: Preconditions | undefined, current: string): void {
  if (p === undefined) return;
  assertIfMatch(p.ifMatch, current);
  const none = p.ifNoneMatch;
  if (none === undefined || !('any' in none || none.tags.includes(current))) return;
  throw new AppError('PRECONDITION_FAILED', 'the set is still the one If-None-Match names (its ETag matches): nothing was written', {
    headers: { ETag: quoted(current) },
  });
}

/** The header value of a tag. */
export const quoted = (tag: string): string => `"${tag}"`;

/** A strong tag for a representation: the first 128 bits of its SHA-256, base64url. */
export const contentTag = (canonical: string): string => createHash('sha256').update(canonical).digest('base64url').slice(0, 22);

/** OpenAPI: the If-Match request header of a PUT replacing a set. */
export const IF_MATCH_HEADER = {
  name: 'If-Match',
  required: false,
  description:
    'the ETag of the set this change was made against (from GET, or the last PUT): when the set has changed since, 412 PRECONDITION_FAILED and nothing ' +
    'is written. * or absent: no check (the last PUT wins). A list of tags matches any of them; a weak tag (W/"…") never matches; anything else is 400',
};

/** OpenAPI: the ETag response header. */
export const ETAG_HEADER = { description: 'the tag of the set as answered, for If-Match on PUT', schema: { type: 'string' } };

export const PRECONDITION_FAILED_TEXT =
  'PRECONDITION_FAILED: If-Match named a tag the set no longer has (another change came first); nothing was written. ETag holds the current tag: read the set again';

/**
 * The 304 of a GET that answers an ETag (…/policies, …/tool-permissions): an If-None-Match naming the current tag is
 * answered Not Modified, no body (Express's freshness check, RFC 9110 §13.1.2), so a client polling for changes reads
 * the set only when it changed. Every /v1 answer is Cache-Control: no-store: no cache in between keeps one.
 */
export const NOT_MODIFIED = {
  status: 304,
  description: 'If-None-Match named the current ETag: not modified, no body (the set is as the client has it)',
  headers: { ETag: ETAG_HEADER },
};
