import { hasLoneSurrogate } from '../common/lone-surrogate.js';
import { findText } from '../common/storable-text.js';

/**
 * Where a tool call's params hold a lone UTF-16 surrogate (half of a pair: an emoji the model cut in two), as the keys
 * down to it: a string value's, or a key's own (the key last). Undefined when every string and key is well-formed.
 *
 * JSON.parse accepts "\ud83d", but the text has no UTF-8 form: a vendor is sent the escape (JSON.stringify keeps it),
 * which a strict parser refuses (Ruby's JSON, behind Shopify, raises on it) and a lax one stores as "?" or bytes that
 * are not UTF-8, while the ledger, the policy and an approver see U+FFFD (storableText). A call holding one is refused
 * before anything is sent, as a Nango query value or an SP-API NextToken was already. NUL is UTF-8 and valid JSON, and
 * goes on (the ledger shows it as U+FFFD: the database cannot hold it).
 *
 * Iterative (the body reader bounds the depth, but no recursion is needed to walk it); on every call, so the paths
 * are built only once one is known to be there.
 */
export function loneSurrogatePath(params: Record<string, unknown>): string[] | undefined {
  return findText(params, hasLoneSurrogate) === undefined ? undefined : firstPath(params);
}

/** The first offending string or key in document order. */
function firstPath(params: Record<string, unknown>): string[] | undefined {
  const stack: { value: unknown; path: string[] }[] = [{ value: params, path: [] }];
  while (stack.length) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      if (hasLoneSurrogate(value)) return path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: [...path, String(i)] });
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i];
        if (hasLoneSurrogate(key)) return [...path, key];
        stack.push({ value: item, path: [...path, key] });
      }
    }
  }
  return undefined;
}
