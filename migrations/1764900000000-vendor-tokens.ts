import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Token state of grants whose refresh token the vendor replaces on every use
 * (Shopify's expiring offline tokens): the refresh token to use next and the
 * access token it bought, encrypted like the credentials they come from
 * (AES-256-GCM, AAD = org + integration), and the lease of the one replica
 * refreshing. `grant_id` names the configured grant (a digest, no secret); the
 * row goes with the org's credentials.
 */
export class VendorTokens1764900000000 implements MigrationInterface {
  name = 'VendorTokens1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE vendor_tokens (
        org_id uuid NOT NULL,
        integration_type text NOT NULL,
        grant_id text NOT NULL,
        key_id text,
        iv bytea,
        ciphertext bytea,
        auth_tag bytea,
        access_expires_at timestamptz,
        lease_id uuid,
        lease_until timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org_id, integration_type),
        CONSTRAINT vendor_tokens_credentials_fk FOREIGN KEY (org_id, integration_type)
          REFERENCES integration_credentials (org_id, integration_type) ON DELETE CASCADE,
        CONSTRAINT vendor_tokens_sealed CHECK (
          (key_id IS NULL) = (ciphertext IS NULL) AND (iv IS NULL) = (ciphertext IS NULL)
          AND (auth_tag IS NULL) = (ciphertext IS NULL) AND (access_expires_at IS NULL) = (ciphertext IS NULL))
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE vendor_tokens');
  }
}
