import { Column, Entity, PrimaryColumn } from 'typeorm';

export type IntegrationType = 'shopify' | 'amazon' | 'jumio' | 'nango';
export const INTEGRATION_TYPES: readonly IntegrationType[] = ['shopify', 'amazon', 'jumio', 'nango'];

/** Encrypted vendor config of one org (AES-256-GCM, AAD = org id + integration type). */
@Entity('integration_credentials')
export class IntegrationCredentialEntity {
  @PrimaryColumn('uuid', { name: 'org_id' }) orgId!: string;
  @PrimaryColumn('text', { name: 'integration_type' }) integrationType!: IntegrationType;
  @Column('text', { name: 'key_id' }) keyId!: string;
  @Column('bytea') iv!: Buffer;
  @Column('bytea') ciphertext!: Buffer;
  @Column('bytea', { name: 'auth_tag' }) authTag!: Buffer;
  @Column('text') fingerprint!: string;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
