import { Column, Entity, PrimaryColumn } from 'typeorm';

export type RunStatus = 'running' | 'waiting_approval' | 'completed' | 'cancelled';

@Entity('agent_runs')
export class AgentRunEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('text', { name: 'specialist_id' }) specialistId!: string;
  @Column('text', { name: 'conversation_id', nullable: true }) conversationId!: string | null;
  @Column('text') status!: RunStatus;
  /** { runtimeManifest: { allowedTools: string[] }, user?: object, ended?: { at, reason } } (ended: set by the run end) */
  @Column('jsonb') metadata!: {
    runtimeManifest: { allowedTools: string[] };
    user?: Record<string, unknown>;
    ended?: { at?: string; reason: string | null };
  };
  @Column('integer', { name: 'pending_approval_count', default: 0 }) pendingApprovalCount!: number;
  @Column('uuid', { name: 'created_by', nullable: true }) createdBy!: string | null;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
