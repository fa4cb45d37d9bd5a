import { REDACTED } from './markers.js';
import { isSecretFieldName, isSecretName } from './secret-keys.js';

/**
 * A secret name and its value written apart by something other than ":" or "=" (secret-fields.ts, redactSecretParams):
 * - a tab, as a TSV export or a spreadsheet copied out writes a row ("password\t…"): any cell that is a secret name
 *   hides the cell after it;
 * - a pipe, as a Markdown or ASCII-box table writes a row ("| password | … |"): only the first cell of a row that opens
 *   with "|" names the cell after it, so a page title or a menu ("Forgot Password | Acme", "Settings | Password |
 *   Logout") and a table's header row ("| name | password | email |") stay;
 * - a blank after a command line flag ("mysql --password … -h db", "--api-key \"…\""): the flag's name judged as a
 *   parameter name, the value one token (or a quoted string); a value that is another flag ("--password --stdin") is
 *   none.
 * A name is a cell of at most two words (a field name, or a label such as "API Key"): a sentence before a tab or a
 * pipe names nothing. As with "name: value", a secret name's neighbour in prose goes with it ("--token option" loses
 * "option"), the accepted cost. Each separator is looked at once, and reads back no further than the previous one
 * (and at most NAME_MAX characters), so the pass is linear.
 */
export function redactSeparatedFields(text: string): string {
  let out = text;
  if (out.includes('\t')) out = redactCells(out, '\t');
  if (out.includes('|')) out = redactCells(out, '|');
  if (out.includes('--')) out = redactFlags(out);
  return out;
}

const NAME_MAX = 128;
const LINE_BREAK = /[\r\n\u2028\u2029]/;

function isLineBreak(ch: string | undefined): boolean {
  return ch !== undefined && LINE_BREAK.test(ch);
}

function isSpace(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\u00a0';
}

function redactCells(text: string, separator: '\t' | '|'): string {
  let out = '';
  let cursor = 0;
  for (let at = text.indexOf(separator); at >= 0; ) {
    let next = at + 1;
    const name = cellBefore(text, at, separator, cursor);
    if (name !== undefined && isCellName(name)) {
      const [start, end] = cellAfter(text, at + 1, separator);
      if (end > start && !text.startsWith(REDACTED, start) && !/^(?:null|true|false)$/.test(text.slice(start, end))) {
        out += text.slice(cursor, start) + REDACTED;
        cursor = end;
        next = end;
      }
    }
    at = text.indexOf(separator, next);
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

/**
 * The cell that ends at the separator at `at`, unquoted and trimmed: for a tab, back to the previous tab or line break;
 * for a pipe, only the first cell of a row that opens with "|" (blanks before it). undefined when there is none, or
 * when it is longer than a name. Never reads back before `floor` (what was already taken) nor further than NAME_MAX.
 */
function cellBefore(text: string, at: number, separator: '\t' | '|', floor: number): string | undefined {
  let start = at;
  while (start > floor && at - start <= NAME_MAX && text[start - 1] !== separator && !isLineBreak(text[start - 1])) start--;
  if (at - start > NAME_MAX) return undefined;
  if (separator === '|') {
    // The row's opening pipe, with only blanks before it on its line.
    if (start === floor || text[start - 1] !== '|') return undefined;
    let lineStart = start - 1;
    while (lineStart > 0 && (isSpace(text[lineStart - 1]) || text[lineStart - 1] === '\t')) lineStart--;
    if (lineStart > 0 && !isLineBreak(text[lineStart - 1])) return undefined;
  }
  let cell = text.slice(start, at).trim();
  if (cell.length >= 2 && (cell[0] === '"' || cell[0] === "'") && cell[cell.length - 1] === cell[0]) cell = cell.slice(1, -1).trim();
  return cell === '' ? undefined : cell;
}

/** A field name or a short label: one or two words, no more (a sentence names nothing). */
function isCellName(cell: string): boolean {
  const blanks = cell.match(/\s+/g);
  return (blanks === null || blanks.length === 1) && isSecretFieldName(cell);
}

/** [start, end) of the cell after a separator: past its blanks (and further tabs of aligned text), to the next separator or line end. */
function cellAfter(text: string, from: number, separator: '\t' | '|'): [number, number] {
  let start = from;
  while (isSpace(text[start]) || text[start] === '\t') start++;
  let end = start;
  while (end < text.length && text[end] !== separator && !isLineBreak(text[end])) end++;
  while (end > start && (isSpace(text[end - 1]) || text[end - 1] === '\t')) end--;
  // A quoted cell ("…") keeps its quotes.
  if (end - start >= 2 && (text[start] === '"' || text[start] === "'") && text[end - 1] === text[start]) return [start + 1, end - 1];
  return [start, end];
}

/** A long flag's name after "--": starts with a letter. */
const FLAG_NAME = /[A-Za-z][\w.-]{0,127}/y;
/** Where an unquoted flag value ends. */
const VALUE_END = /[\s"'\\,;&<>(){}[\]|]/g;
/** A value that is another flag (--stdin, -h): not a value. */
const FLAG = /^--?[A-Za-z]/;

function redactFlags(text: string): string {
  let out = '';
  let cursor = 0;
  for (let at = text.indexOf('--'); at >= 0; ) {
    let next = at + 2;
    const before = text[at - 1];
    FLAG_NAME.lastIndex = at + 2;
    const name = (at === 0 || before === undefined || /[\s"'(=`]/.test(before)) && FLAG_NAME.exec(text);
    if (name) {
      next = FLAG_NAME.lastIndex;
      let start = next;
      while (text[start] === ' ' || text[start] === '\t') start++;
      if (start > next && isSecretName(name[0])) {
        const quote = text[start] === '"' || text[start] === "'" ? text[start] : undefined;
        let end: number;
        if (quote !== undefined) {
          start++;
          end = start;
          while (end < text.length && text[end] !== quote && !isLineBreak(text[end])) end++;
          if (text[end] !== quote) end = start;
        } else {
          VALUE_END.lastIndex = start;
          end = VALUE_END.exec(text)?.index ?? text.length;
        }
        const value = text.slice(start, end);
        if (end > start && !FLAG.test(value) && !value.startsWith(REDACTED) && !/^(?:null|true|false)$/.test(value)) {
          out += text.slice(cursor, start) + REDACTED;
          cursor = end;
          next = end;
        }
      }
    }
    at = text.indexOf('--', next);
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

