import { Column, Entity, PrimaryColumn } from 'typeorm';

/** The full (unredacted) result of a call, encrypted, kept for the result TTL. */
@Entity('tool_call_results')
export class ToolCallResultEntity {
  @PrimaryColumn('uuid', { name: 'tool_call_id' }) toolCallId!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('text', { name: 'key_id' }) keyId!: string;
  @Column('bytea') iv!: Buffer;
  @Column('bytea') ciphertext!: Buffer;
  @Column('bytea', { name: 'auth_tag' }) authTag!: Buffer;
  @Column('integer', { name: 'size_bytes' }) sizeBytes!: number;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'expires_at' }) expiresAt!: Date;
}
