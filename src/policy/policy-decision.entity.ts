import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

@Entity('policy_decisions')
@Index('policy_decisions_call_idx', ['toolCallId'])
export class PolicyDecisionEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('uuid', { name: 'tool_call_id' }) toolCallId!: string;
  @Column('text') decision!: string;
  @Column('text', { name: 'risk_level' }) riskLevel!: string;
  @Column('text', { name: 'rule_id', nullable: true }) ruleId!: string | null;
  @Column('text') reason!: string;
  @Column('text', { name: 'action_digest' }) actionDigest!: string;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
}
