import { isUtf8 } from 'node:buffer';

const ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;
const ASCII_ESCAPE = /%[0-7][0-9A-Fa-f]/g;

/**
 * Text as a URL's reader would see it, for judging only (what is kept is always the text as written): each run of
 * UTF-8 escapes decoded, as decodeURIComponent does; in a malformed one (%E0%A4%40) only the ASCII escapes, the rest
 * left as written, so a broken escape next to a name or a contact does not hide it. Decided without throwing: a text
 * of malformed escapes ("%9A " repeated) made decodeURIComponent throw once per escape, several times per text, about
 * 100 times the cost of plain text of its size (a 520 KB vendor answer took 4 s to redact).
 */
export function percentDecode(text: string): string {
  if (!text.includes('%')) return text;
  return text.replace(ESCAPE_RUN, (escapes) => {
    if (escapes.length === 3) {
      // One byte: ASCII, or (0x80 and up) never UTF-8 on its own.
      const byte = parseInt(escapes.slice(1), 16);
      return byte < 0x80 ? String.fromCharCode(byte) : escapes;
    }
    const bytes = Buffer.from(escapes.replaceAll('%', ''), 'hex');
    // Well-formed UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF) is exactly what decodeURIComponent takes.
    if (isUtf8(bytes)) return bytes.toString('utf8');
    return escapes.replace(ASCII_ESCAPE, (ascii) => String.fromCharCode(parseInt(ascii.slice(1), 16)));
  });
}
