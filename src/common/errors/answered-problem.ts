/**
 * The problem code each error answer carried (sendProblem), for its "request completed" line: a 409 ACTION_DIGEST_MISMATCH
 * (someone approving an action other than the one shown) must be told from a 409 APPROVAL_ALREADY_DECIDED (a lost race),
 * a 403 POLICY_BLOCKED from a 403 FORBIDDEN. Codes are a fixed set; nothing of the request is kept.
 */
const codes = new WeakMap<object, string>();

/**
 * Why a 503 DATABASE_UNAVAILABLE was answered (databaseCause: a SQLSTATE or driver code, and our phrase for it), for
 * the same line: one line per answer during an outage, not the answer's line and a warning beside it.
 */
const databaseCauses = new WeakMap<object, { code: string; cause: string }>();

export function rememberProblemCode(res: object, code: string): void {
  codes.set(res, code);
}

export function problemCodeOf(res: object): string | undefined {
  return codes.get(res);
}

export function rememberDatabaseCause(res: object, cause: { code: string; cause: string }): void {
  databaseCauses.set(res, cause);
}

export function databaseCauseOf(res: object): { code: string; cause: string } | undefined {
  return databaseCauses.get(res);
}
