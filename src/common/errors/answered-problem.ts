/**
 * The problem code each error answer carried (sendProblem), for its "request completed" line: a 409 ACTION_DIGEST_MISMATCH
 * (someone approving an action other than the one shown) must be told from a 409 APPROVAL_ALREADY_DECIDED (a lost race),
 * a 403 POLICY_BLOCKED from a 403 FORBIDDEN. Codes are a fixed set; nothing of the request is kept.
 */
const codes = new WeakMap<object, string>();

export function rememberProblemCode(res: object, code: string): void {
  codes.set(res, code);
}

export function problemCodeOf(res: object): string | undefined {
  return codes.get(res);
}
