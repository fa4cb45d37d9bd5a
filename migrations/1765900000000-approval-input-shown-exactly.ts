import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * approval_requests.input_shown_exactly: whether the redacted input an approver reads (inputRedacted) is the input
 * that runs, every value as written, nothing hidden, cut or replaced (redaction/shown-exactly.ts). Two writes that
 * differ only in a value redaction hides (under a secret-looking name, a card-shaped id, past the size bounds, a NUL)
 * were shown alike; false tells the approver so, where the in-band markers ("[REDACTED]", "[Truncated]") could have
 * been written by the caller. Null for approvals made before, and by a previous release during a rolling upgrade,
 * which inserts without it (a nullable column with no default: no rewrite, and no change for that release).
 */
export class ApprovalInputShownExactly1765900000000 implements MigrationInterface {
  name = 'ApprovalInputShownExactly1765900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE approval_requests ADD COLUMN IF NOT EXISTS input_shown_exactly boolean');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE approval_requests DROP COLUMN IF EXISTS input_shown_exactly');
  }
}
