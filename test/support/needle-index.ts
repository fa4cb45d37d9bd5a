/**
 * Finds which of many needles a text holds in one pass over the text, however
 * many needles there are: the run-wide scan searches every API key and vendor
 * token minted during the run (thousands of values, each in a dozen forms),
 * and one `includes` per needle per line or row would take minutes.
 *
 * Every needle is at least KEY_LENGTH characters long. A rolling hash of
 * KEY_LENGTH characters of the text, checked against a bit set of the needles'
 * last KEY_LENGTH characters, rejects almost every position at the cost of a
 * few arithmetic operations; a position that passes is looked up by its actual
 * characters and each candidate compared in full. The last characters, not the
 * first: needles of one kind share their start (tgw_, a JWT's header, their
 * hex), and their end is in the random part.
 */
export const KEY_LENGTH = 8;

const BASE = 0x01000193;
/** BASE^(KEY_LENGTH-1) mod 2^32: what the character leaving the window contributed. */
const LEAVING = Array.from({ length: KEY_LENGTH - 1 }).reduce<number>((p) => Math.imul(p, BASE), 1);
const BITS = 22;
const slot = (hash: number): number => hash >>> (32 - BITS);

function hashOf(text: string): number {
  let h = 0;
  for (let i = 0; i < KEY_LENGTH; i++) h = (Math.imul(h, BASE) + text.charCodeAt(i)) | 0;
  return h;
}

export class NeedleIndex<N extends { text: string }> {
  private readonly byKey = new Map<string, N[]>();
  private readonly bits = new Uint32Array((1 << BITS) / 32);

  constructor(needles: readonly N[]) {
    for (const n of needles) {
      if (n.text.length < KEY_LENGTH) throw new Error(`a needle shorter than ${KEY_LENGTH} characters cannot be indexed`);
      const key = n.text.slice(-KEY_LENGTH);
      const list = this.byKey.get(key);
      if (list) list.push(n);
      else this.byKey.set(key, [n]);
      const s = slot(hashOf(key));
      this.bits[s >>> 5]! |= 1 << (s & 31);
    }
  }

  /** The needles `text` holds, each once, in the order their ends were found. */
  find(text: string): N[] {
    const found: N[] = [];
    if (text.length < KEY_LENGTH || this.byKey.size === 0) return found;
    let h = hashOf(text);
    for (let start = 0; ; start++) {
      const s = slot(h);
      const next = start + KEY_LENGTH;
      if (this.bits[s >>> 5]! & (1 << (s & 31))) {
        for (const n of this.byKey.get(text.slice(start, next)) ?? []) {
          const at = next - n.text.length;
          if (at >= 0 && !found.includes(n) && text.startsWith(n.text, at)) found.push(n);
        }
      }
      if (next >= text.length) return found;
      h = (Math.imul((h - Math.imul(text.charCodeAt(start), LEAVING)) | 0, BASE) + text.charCodeAt(next)) | 0;
    }
  }
}
