import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

export interface EventActor {
  keyId: string | null;
  role: string | null;
  /** The X-Correlation-Id of the request that caused an admin event (actorOf); absent on a tool call's events. */
  correlationId?: string;
}

/** Append-only (enforced by a trigger); hash-chained per org by the sealer. */
@Entity('runtime_ledger_events')
export class LedgerEventEntity {
  /** The database's alone: an insert naming it fails (see SealFrontier for why). */
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' }) seq!: string;
  @Column('uuid', { unique: true }) id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('text') type!: string;
  @Column('uuid', { name: 'run_id', nullable: true }) runId!: string | null;
  @Column('uuid', { name: 'tool_call_id', nullable: true }) toolCallId!: string | null;
  @Column('jsonb', { nullable: true }) actor!: EventActor | null;
  @Column('jsonb', { default: () => "'{}'::jsonb" }) metadata!: Record<string, unknown>;
  @Column('timestamptz', { name: 'created_at', default: () => 'clock_timestamp()' }) createdAt!: Date;
  @Column('bigint', { name: 'chain_seq', nullable: true }) chainSeq!: string | null;
  @Column('text', { name: 'prev_hash', nullable: true }) prevHash!: string | null;
  @Column('text', { nullable: true }) hash!: string | null;
  @Column('timestamptz', { name: 'sealed_at', nullable: true }) sealedAt!: Date | null;
}
