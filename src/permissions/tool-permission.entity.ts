import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity('tool_permissions')
export class ToolPermissionEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid', { name: 'org_id' }) orgId!: string;
  @Column('text', { name: 'tool_name' }) toolName!: string;
  @Column('text') action!: string;
  @Column('text', { name: 'specialist_id', nullable: true }) specialistId!: string | null;
  @Column('boolean') enabled!: boolean;
  @Column('timestamptz', { name: 'updated_at', default: () => 'now()' }) updatedAt!: Date;
}
