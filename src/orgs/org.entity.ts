import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity('orgs')
export class OrgEntity {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') name!: string;
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' }) createdAt!: Date;
  /**
   * The org's action digest key (see actionDigest): 32 random bytes, made with the org (OrgsService.create; the
   * column's default for a row inserted otherwise) and never changed. Not read with the entity: OrgDigestKeys reads it.
   */
  @Column('bytea', { name: 'digest_key', select: false }) digestKey!: Buffer;
}
