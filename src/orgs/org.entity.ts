import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity('orgs')
export class OrgEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') name!: string;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
}
