import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { isUuid, NIL_UUID } from '../common/ids.js';
import { ownString } from '../common/own-string.js';
import { OrgEntity } from './org.entity.js';

export interface ScopeOptions {
  /**
   * Ledger reads: a platform key may also name the platform chain, NIL_UUID, where the events no
   * org owns are filed (platform keys created and revoked, bootstrap keys retired). No org can take
   * that id (OrgsService), so it has no row in orgs; an org key naming it still gets a 404.
   */
  platformChain?: boolean;
}

/**
 * The org-scope rule in one place: a resource of another org is
 * indistinguishable from a missing one (404, same body).
 */
@Injectable()
export class OrgScopeService {
  private readonly known = new Set<string>();

  constructor(private readonly ds: DataSource) {}

  async assertAccess(p: Principal, orgId: string, { platformChain = false }: ScopeOptions = {}): Promise<void> {
    if (platformChain && p.orgId === null && orgId === NIL_UUID) return;
    if (!isUuid(orgId) || (p.orgId !== null && p.orgId !== orgId)) throw new AppError('NOT_FOUND', 'org not found');
    if (this.known.has(orgId)) return;
    if (!(await this.ds.getRepository(OrgEntity).exists({ where: { id: orgId } }))) throw new AppError('NOT_FOUND', 'org not found');
    // A copy of its own: an id from a query string is a cut of the whole URL, which V8 would keep alive with it.
    this.known.add(ownString(orgId));
  }

  /** The org a key acts for: its own, or (platform keys) the one named. */
  async resolveOrg(p: Principal, orgId: string | undefined, opts: ScopeOptions = {}): Promise<string> {
    if (p.orgId !== null) {
      if (orgId !== undefined) await this.assertAccess(p, orgId, opts);
      return p.orgId;
    }
    if (orgId === undefined) throw new AppError('VALIDATION_FAILED', 'orgId: required for platform keys');
    await this.assertAccess(p, orgId, opts);
    return orgId;
  }
}
