import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { newId, NIL_UUID } from '../common/ids.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { OrgScopeService } from './org-scope.service.js';
import { OrgEntity } from './org.entity.js';
import { ORG_NAME_MAX } from './orgs.dto.js';
import { redactFreeTextWithin } from '../redaction/redaction.service.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';

/** The 403 an org key gets on POST /v1/orgs (the route's @PlatformKeyOnly, and create's own check). */
export const ORGS_NEED_PLATFORM_ADMIN = 'only a platform admin can create orgs';

const view = (o: Pick<OrgEntity, 'id' | 'name' | 'createdAt'>) => ({ id: o.id, name: o.name, createdAt: o.createdAt.toISOString() });

@Injectable()
export class OrgsService {
  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
    private readonly scope: OrgScopeService,
    private readonly clock: Clock,
  ) {}

  async create(actor: Principal, input: { name: string; id?: string }) {
    if (actor.orgId !== null) throw new AppError('FORBIDDEN', ORGS_NEED_PLATFORM_ADMIN);
    // Platform-level audit events are filed under NIL_UUID: an org with that id would read them.
    if (input.id?.toLowerCase() === NIL_UUID) {
      throw new AppError('VALIDATION_FAILED', 'id: the nil UUID 00000000-0000-0000-0000-000000000000 is reserved for platform-level events and cannot be an org id');
    }
    // Kept and shown back (admin and ops keys read it): redacted as every such free text is.
    const org = Object.assign(new OrgEntity(), { id: input.id ?? newId(), name: redactFreeTextWithin(input.name, ORG_NAME_MAX), createdAt: this.clock.now() });
    await this.ds.transaction(async (m) => {
      // Its action digest key: 32 bytes from the CSPRNG, never changed afterwards (see OrgDigestKeys).
      const inserted = (await m.query('INSERT INTO orgs (id, name, created_at, digest_key) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING id', [
        org.id,
        org.name,
        org.createdAt,
        randomBytes(32),
      ])) as unknown[];
      if (inserted.length === 0) throw new AppError('CONFLICT', 'an org with this id already exists');
      await holdActorKey(managerQuery(m), actor);
      await this.events.append([{ orgId: org.id, type: 'org.created', actor: actorOf(actor), metadata: { orgId: org.id } }], m);
    });
    return view(org);
  }

  async get(actor: Principal, orgId: string) {
    await this.scope.assertAccess(actor, orgId);
    const org = await this.ds.getRepository(OrgEntity).findOneOrFail({ where: { id: orgId } });
    return view(org);
  }
}
