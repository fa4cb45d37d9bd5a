import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

export type Role = 'agent' | 'ops' | 'expert' | 'admin';
export const ROLES: readonly Role[] = ['agent', 'ops', 'expert', 'admin'];

@Entity('api_keys')
@Index('api_keys_hash_uq', ['keyHash'], { unique: true })
@Index('api_keys_org_idx', ['orgId', 'createdAt'])
export class ApiKeyEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id', nullable: true }) orgId!: string | null;
  @Column('text') role!: Role;
  @Column('text') name!: string;
  /** SHA-256 of the key; the key itself is never stored. */
  @Column('bytea', { name: 'key_hash' }) keyHash!: Buffer;
  @Column('text', { name: 'key_prefix' }) keyPrefix!: string;
  @Column('uuid', { name: 'created_by', nullable: true }) createdBy!: string | null;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'revoked_at', nullable: true }) revokedAt!: Date | null;
  @Column('timestamptz', { name: 'last_used_at', nullable: true }) lastUsedAt!: Date | null;
}
