import { Column, Entity, PrimaryColumn } from 'typeorm';

export const APPROVAL_KINDS = ['expert', 'client'] as const;
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];
export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired';

@Entity('approval_requests')
export class ApprovalRequestEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('uuid', { name: 'tool_call_id', unique: true }) toolCallId!: string;
  @Column('uuid', { name: 'run_id' }) runId!: string;
  @Column('text') kind!: ApprovalKind;
  @Column('text') status!: ApprovalStatus;
  @Column('text', { name: 'tool_name' }) toolName!: string;
  @Column('text') action!: string;
  @Column('jsonb', { name: 'input_redacted' }) inputRedacted!: unknown;
  /** inputRedacted is the input itself (nothing hidden, cut or replaced); null for approvals made before it was recorded */
  @Column('boolean', { name: 'input_shown_exactly', nullable: true }) inputShownExactly!: boolean | null;
  @Column('text', { name: 'risk_level' }) riskLevel!: string;
  @Column('text') reason!: string;
  @Column('text', { name: 'action_digest' }) actionDigest!: string;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'expires_at' }) expiresAt!: Date;
  @Column('uuid', { name: 'decided_by', nullable: true }) decidedBy!: string | null;
  @Column('text', { name: 'decided_role', nullable: true }) decidedRole!: string | null;
  @Column('timestamptz', { name: 'decided_at', nullable: true }) decidedAt!: Date | null;
  @Column('text', { name: 'decision_reason', nullable: true }) decisionReason!: string | null;
}
