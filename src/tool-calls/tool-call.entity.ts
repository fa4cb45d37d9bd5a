import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { ToolCallStatus } from './tool-call-status.js';

/** The ledger row of one tool call (API.md §6). Written with SQL on the hot path; read through this entity. */
@Entity('tool_calls')
export class ToolCallEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('uuid', { name: 'run_id' }) runId!: string;
  @Column('text', { name: 'specialist_id' }) specialistId!: string;
  @Column('text', { name: 'tool_name' }) toolName!: string;
  @Column('text') action!: string;
  @Column('text', { nullable: true }) vendor!: string | null;
  @Column('text') status!: ToolCallStatus;
  @Column('text', { name: 'error_code', nullable: true }) errorCode!: string | null;
  @Column('text', { name: 'error_text', nullable: true }) errorText!: string | null;
  @Column('integer', { name: 'http_status', default: 200 }) httpStatus!: number;
  @Column('text', { name: 'correlation_id' }) correlationId!: string;
  @Column('text', { name: 'idempotency_key' }) idempotencyKey!: string;
  @Column('text', { name: 'tool_use_id' }) toolUseId!: string;
  /** False only on a call recorded before its tool_use id became unique per run, under an id an earlier call of the run held. */
  @Column('boolean', { name: 'tool_use_unique', default: true }) toolUseUnique!: boolean;
  @Column('text', { name: 'action_digest' }) actionDigest!: string;
  @Column('jsonb', { name: 'input_redacted' }) inputRedacted!: unknown;
  @Column('jsonb', { name: 'output_redacted', nullable: true }) outputRedacted!: unknown;
  @Column('text', { name: 'risk_level', nullable: true }) riskLevel!: string | null;
  @Column('uuid', { name: 'policy_decision_id', nullable: true }) policyDecisionId!: string | null;
  @Column('integer', { name: 'retry_count', default: 0 }) retryCount!: number;
  @Column('integer', { name: 'retry_after_seconds', nullable: true }) retryAfterSeconds!: number | null;
  @Column('integer', { name: 'vendor_status', nullable: true }) vendorStatus!: number | null;
  @Column('boolean', { name: 'vendor_refused', nullable: true }) vendorRefused!: boolean | null;
  @Column('integer', { name: 'duration_ms', nullable: true }) durationMs!: number | null;
  @Column('integer', { name: 'cost_cents', default: 0 }) costCents!: number;
  @Column('boolean', { default: false }) truncated!: boolean;
  @Column('uuid', { name: 'actor_key_id', nullable: true }) actorKeyId!: string | null;
  @Column('text', { nullable: true }) note!: string | null;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  @Column('timestamptz', { name: 'started_at', nullable: true }) startedAt!: Date | null;
  /**
   * Set when the call goes running: how long the replica that started it may hold it (its VENDOR_TIMEOUT_MS +
   * STALE_RUNNING_MARGIN_MS), what the orphan sweep judges it by. Null on calls started before it was recorded.
   */
  @Column('integer', { name: 'stale_after_ms', nullable: true }) staleAfterMs!: number | null;
  @Column('timestamptz', { name: 'finished_at', nullable: true }) finishedAt!: Date | null;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
