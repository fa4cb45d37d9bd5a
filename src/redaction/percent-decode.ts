/**
 * Text as a URL's reader would see it, for judging only (what is kept is always the text as written): each run of
 * UTF-8 escapes decoded; in a malformed one (%E0%A4%40) only the ASCII escapes, the rest left as written, so a
 * broken escape next to a name or a contact does not hide it.
 */
export function percentDecode(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes.replace(/%[0-7][0-9A-Fa-f]/g, (ascii) => String.fromCharCode(parseInt(ascii.slice(1), 16)));
    }
  });
}
