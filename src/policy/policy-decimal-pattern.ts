/**
 * Whether a JSON Schema `pattern` lets some plain decimal text through (what parseDecimal reads: -?\d+(\.\d+)?), so
 * that a gt/gte/lt/lte on a string param can ever be evaluated. Judged on probes, not by reading the pattern: runs
 * of 1–40 digits led by each digit, the rest that digit or zeros, signed or not, with or without a fraction. The
 * patterns this is asked about are the catalog's, few and ours: an amount and numeric ids admit such text; an
 * Amazon order id (3-7-7 digits with dashes), a currency code and a UUID admit none. A pattern the engine cannot
 * compile is taken to admit one (the answer errs on "may": a rule is refused only when no probe passes).
 */
export function patternMayMatchDecimal(pattern: string): boolean {
  let re: RegExp;
  try {
    re = new RegExp(pattern, 'u');
  } catch {
    return true;
  }
  return DECIMAL_PROBES.some((probe) => re.test(probe));
}

const DECIMAL_PROBES: readonly string[] = (() => {
  const probes: string[] = [];
  for (let length = 1; length <= 40; length++) {
    for (let lead = 0; lead <= 9; lead++) {
      for (const fill of [String(lead), '0']) {
        const digits = String(lead) + fill.repeat(length - 1);
        for (const sign of ['', '-']) for (const fraction of ['', '.5', '.05', '.00']) probes.push(sign + digits + fraction);
      }
    }
  }
  return [...new Set(probes)];
})();
