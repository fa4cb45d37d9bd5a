import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * orgs.digest_key: each org's key for its action digests (actionDigest: HMAC-SHA256 of the canonical {toolName,
 * action, params}). The digest was a plain SHA-256, shown beside the redacted input (GET /v1/tool-calls/:id, the
 * approval view, ledger events and their exports): an offline oracle for a low-entropy redacted value (a PIN, an SSN,
 * a card number). 32 random bytes per org, in clear in its row (not an envelope under the master key: a master key
 * rotation must not change them, since pending approvals' digests, which experts echo back, and idempotency
 * comparisons outlive it; the threat is the digest's readers, who have no database access). Existing orgs get theirs
 * here, new ones from OrgsService.create, any other insert from the default: two gen_random_uuid() (pg_strong_random),
 * 244 random bits. Calls recorded before keep their unkeyed digests (ledger rows are not rewritten): a resend of one is
 * recognised by its unkeyed form (StoredCallAnswers).
 *
 * Added nullable (no rewrite), filled, then given its default and NOT NULL, in this migration's one transaction: orgs
 * holds a row per org, so its ACCESS EXCLUSIVE lock is held for moments (waited for no longer than lock_timeout).
 *
 * Reverting keeps the keys: digests stored under them (calls, approvals, events) cannot be recomputed without them, so
 * dropping them would refuse every later resend of those calls (422 IDEMPOTENCY_KEY_REUSED) by every release, this one
 * rolled forward again included. The previous release ignores the column (it reads the columns it needs; orgs it
 * creates get the default), though it digests new calls unkeyed (recognised by this release as calls from before);
 * applying this again keeps the keys an org has and fills only missing ones.
 */
export class OrgDigestKeys1765800000000 implements MigrationInterface {
  name = 'OrgDigestKeys1765800000000';

  async up(q: QueryRunner): Promise<void> {
    const random32 = 'uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())';
    await q.query('ALTER TABLE orgs ADD COLUMN IF NOT EXISTS digest_key bytea');
    await q.query(`UPDATE orgs SET digest_key = ${random32} WHERE digest_key IS NULL`);
    await q.query(`ALTER TABLE orgs ALTER COLUMN digest_key SET DEFAULT (${random32}), ALTER COLUMN digest_key SET NOT NULL`);
    await q.query('ALTER TABLE orgs DROP CONSTRAINT IF EXISTS orgs_digest_key_len');
    await q.query('ALTER TABLE orgs ADD CONSTRAINT orgs_digest_key_len CHECK (octet_length(digest_key) >= 32)');
  }

  /** Keeps the keys (see above): the digests recorded under them outlive a rollback. */
  async down(): Promise<void> {}
}
