/**
 * What an approver's screen may show otherwise than it runs, in an approval's input: the bytes shown are the bytes
 * that run (inputShownExactly), but a renderer draws them. Unicode format characters are invisible or reorder the text
 * around them — "\u202E00.009" draws as 900.00, a zero-width space splits an account id unseen, "amount" and
 * "amount\u200B" are two members drawn alike —; letters of Cyrillic or Greek inside a Latin word look like Latin ones
 * ("аcme-payouts" with a Cyrillic "а"); two members of one object alike but for their Unicode form ("amount",
 * "ａmount") draw as one name. Each is said, at its path, so the expert looks closer or rejects.
 */

/** At most this many warnings: the view stays small, and a few say enough to look closer. */
const MAX_WARNINGS = 20;
const MAX_DEPTH = 64;
/**
 * Texts (values and member names) looked at per input: a listing page holds up to 16 MiB of inputs, and an input of
 * tens of thousands of non-ASCII names cost 65–100 ms each to look through (4 s for a page). Past it, said.
 */
const MAX_TEXTS = 4_000;
const ASCII = /^\p{ASCII}*$/u;

const FORMAT = /\p{Cf}/u;
const FORMAT_ALL = /\p{Cf}/gu;
const LATIN = /\p{Script=Latin}/u;
const LOOK_ALIKE_SCRIPTS = /[\p{Script=Cyrillic}\p{Script=Greek}]/u;
const WORD = /[\p{L}\p{M}]+/gu;

/** A character's code point as four or more upper-case hex digits ("200B"). */
const hex = (c: string): string => c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');

/** A member name as JSON would write it, with every format character escaped so the warning itself shows it. */
function shown(text: string): string {
  return JSON.stringify(text).replace(FORMAT_ALL, (c) => `\\u${hex(c)}`);
}

const PLAIN_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The path to a member: `a.b` for plain names, `a["b c"]` (escaped, as shown) for any other. */
const memberPath = (path: string, name: string): string => (PLAIN_NAME.test(name) ? (path ? `${path}.${name}` : name) : `${path}[${shown(name)}]`);

function codes(text: string): string {
  const found = new Set<string>();
  for (const c of text.match(FORMAT_ALL) ?? []) found.add(`U+${hex(c)}`);
  return [...found].slice(0, 5).join(', ');
}

function mixesScripts(text: string): boolean {
  if (!LOOK_ALIKE_SCRIPTS.test(text) || !LATIN.test(text)) return false;
  for (const word of text.match(WORD) ?? []) if (LATIN.test(word) && LOOK_ALIKE_SCRIPTS.test(word)) return true;
  return false;
}

/** The name as a screen draws it: format characters gone, compatibility forms folded. */
const drawn = (name: string): string => name.replace(FORMAT_ALL, '').normalize('NFKC');

/** A zero-width joiner between two pictographs joins an emoji sequence (👨‍👩‍👧): drawn as one emoji, as meant. */
const EMOJI_JOINER = /(?<=\p{Extended_Pictographic}\uFE0F?)\u200D(?=\p{Extended_Pictographic})/gu;

function textWarnings(text: string, where: string, what: 'member name' | 'value', out: string[]): void {
  // ASCII holds no format character and no letter of another script: most texts stop here.
  if (ASCII.test(text)) return;
  const unjoined = FORMAT.test(text) ? text.replace(EMOJI_JOINER, '') : '';
  if (FORMAT.test(unjoined)) out.push(`${where}: the ${what} holds invisible or direction-changing characters (${codes(unjoined)}): a screen may show it otherwise than it runs`);
  if (mixesScripts(text)) out.push(`${where}: the ${what} mixes Latin letters with Cyrillic or Greek ones in one word (letters that look alike)`);
}

/** The warnings for an approval's input as recorded (its redacted input: what the expert is shown). */
export function inputWarnings(input: unknown): string[] {
  const out: string[] = [];
  let texts = 0;
  const full = (): boolean => out.length >= MAX_WARNINGS || texts > MAX_TEXTS;
  const walk = (value: unknown, path: string, depth: number): void => {
    if (full() || depth > MAX_DEPTH) return;
    if (typeof value === 'string') {
      texts++;
      textWarnings(value, path || '(the input)', 'value', out);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && !full(); i++) walk(value[i], `${path}[${i}]`, depth + 1);
      return;
    }
    const names = Object.keys(value);
    const byDrawn = new Map<string, string>();
    for (const name of names) {
      if (full()) return;
      texts++;
      const at = memberPath(path, name);
      textWarnings(name, at, 'member name', out);
      const looks = ASCII.test(name) ? name : drawn(name);
      const other = byDrawn.get(looks);
      if (other !== undefined && out.length < MAX_WARNINGS) out.push(`${at}: drawn like the member ${shown(other)} beside it (two members, one name on screen)`);
      else byDrawn.set(looks, name);
      walk((value as Record<string, unknown>)[name], at, depth + 1);
    }
  };
  walk(input, '', 0);
  if (texts > MAX_TEXTS && out.length < MAX_WARNINGS) out.push(`only the first ${MAX_TEXTS} values and member names were looked at: look through the rest yourself`);
  return out.slice(0, MAX_WARNINGS);
}
