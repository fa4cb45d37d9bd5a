import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity('feature_flags')
export class FeatureFlagEntity {
  @PrimaryColumn('uuid', { name: 'org_id' }) orgId!: string;
  @PrimaryColumn('text') flag!: string;
  @Column('boolean') enabled!: boolean;
  @Column('text', { nullable: true }) reason!: string | null;
  @Column('uuid', { name: 'updated_by', nullable: true }) updatedBy!: string | null;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
