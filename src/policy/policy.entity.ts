import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity('policies')
export class PolicyEntity {
  @PrimaryColumn('uuid', { name: 'org_id' }) orgId!: string;
  @Column('jsonb') rules!: unknown[];
  @Column('integer', { default: 1 }) version!: number;
  @Column('uuid', { name: 'updated_by', nullable: true }) updatedBy!: string | null;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
