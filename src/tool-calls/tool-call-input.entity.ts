import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Raw params of a call awaiting approval, encrypted; deleted once the call has run or been refused. */
@Entity('tool_call_inputs')
export class ToolCallInputEntity {
  @PrimaryColumn('uuid', { name: 'tool_call_id' }) toolCallId!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('text', { name: 'key_id' }) keyId!: string;
  @Column('bytea') iv!: Buffer;
  @Column('bytea') ciphertext!: Buffer;
  @Column('bytea', { name: 'auth_tag' }) authTag!: Buffer;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
}
