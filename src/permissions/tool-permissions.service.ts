import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { isEchoableFieldName } from '../common/echoable-field-name.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { contentTag, assertPreconditions, type Preconditions } from '../common/http/if-match.js';
import { newId } from '../common/ids.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { ToolPermissionEntity } from './tool-permission.entity.js';
import type { ToolPermissionDto } from './tool-permissions.dto.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { LOCK_SHARED_SQL, LOCK_SQL, permissionLock } from '../db/advisory-locks.js';

export interface PermissionView {
  toolName: string;
  action: string;
  specialistId: string | null;
  enabled: boolean;
}

/**
 * The actions a specialist may use: for each action, the specialist's own row
 * if there is one, else the org-wide row (API.md §9 precedence, both ways).
 * Pure, so the manifest and the model-facing tool list share one decision.
 */
export function resolveAllowedTools(rows: PermissionView[], specialistId: string, inCatalog: (key: string) => boolean): string[] {
  const orgWide = new Map<string, boolean>();
  const own = new Map<string, boolean>();
  for (const r of rows) {
    const key = `${r.toolName}.${r.action}`;
    if (r.specialistId === null) orgWide.set(key, r.enabled);
    else if (r.specialistId === specialistId) own.set(key, r.enabled);
  }
  const keys = new Set([...orgWide.keys(), ...own.keys()]);
  return [...keys].filter((k) => (own.has(k) ? own.get(k) : orgWide.get(k)) === true && inCatalog(k)).sort();
}

/** What a PUT changed, as its tool_permissions.changed event records it (rows by toolName, action, specialistId). */
export interface PermissionsDiff {
  added: PermissionView[];
  removed: PermissionView[];
  /** Rows kept whose `enabled` flipped, with the old and new value (as feature_flag.changed records from/to). */
  changed: (Omit<PermissionView, 'enabled'> & { from: boolean; to: boolean })[];
}

/**
 * PUT replaces the whole set, so without this the ledger could not say who granted an action or when (two
 * different grants of one size read the same). Each list keeps the order of the set it comes from; a PUT of the
 * same set gives three empty lists. Pure, so the diff is tested apart from the transaction that reads both sets.
 */
export function diffPermissions(before: PermissionView[], after: PermissionView[]): PermissionsDiff {
  // A specialistId is at least one character and never "|" (its pattern), so "" after the bar is the org-wide row.
  const keyOf = (r: PermissionView): string => `${r.toolName}.${r.action}|${r.specialistId ?? ''}`;
  const view = (r: PermissionView): PermissionView => ({ toolName: r.toolName, action: r.action, specialistId: r.specialistId, enabled: r.enabled });
  const was = new Map(before.map((r) => [keyOf(r), r]));
  const kept = new Set(after.map(keyOf));
  const diff: PermissionsDiff = { added: [], removed: before.filter((r) => !kept.has(keyOf(r))).map(view), changed: [] };
  for (const r of after) {
    const prev = was.get(keyOf(r));
    if (!prev) diff.added.push(view(r));
    else if (prev.enabled !== r.enabled) diff.changed.push({ toolName: r.toolName, action: r.action, specialistId: r.specialistId, from: prev.enabled, to: r.enabled });
  }
  return diff;
}

/** The ETag of a set of permission rows: a digest of its rows in one order (code units), whatever order they were read in. */
export function permissionsTag(items: PermissionView[]): string {
  const key = (r: PermissionView) => JSON.stringify([r.toolName, r.action, r.specialistId ?? null, r.enabled]);
  const rows = items.map(key).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return contentTag(`[${rows.join(',')}]`);
}

@Injectable()
export class ToolPermissionsService {
  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
    private readonly clock: Clock,
    private readonly catalog: ToolCatalogService,
  ) {}

  /** `m`: a transaction's manager, to read what it wrote before it commits (see replace). */
  async list(orgId: string, m: EntityManager = this.ds.manager): Promise<PermissionView[]> {
    // A stable order (org-wide row before the specialists' rows) so clients can diff two reads.
    const rows = await m
      .getRepository(ToolPermissionEntity)
      .find({ where: { orgId }, order: { toolName: 'ASC', action: 'ASC', specialistId: { direction: 'ASC', nulls: 'FIRST' } } });
    return rows.map((r) => ({ toolName: r.toolName, action: r.action, specialistId: r.specialistId, enabled: r.enabled }));
  }

  /**
   * A new run's manifest, read in the run's transaction `m` under the org's permission lock taken shared (replace
   * takes it alone): a PUT waits for the runs being created, and a run created after a PUT's 200 holds its set.
   * Read outside, a run created meanwhile kept a tool the PUT had removed, for its whole life.
   */
  async allowedToolsForNewRun(orgId: string, specialistId: string, m: EntityManager): Promise<string[]> {
    await m.query(LOCK_SHARED_SQL, [permissionLock(orgId)]); // the org's permission lock: a change takes it alone
    return resolveAllowedTools(await this.list(orgId, m), specialistId, (k) => this.catalog.has(k));
  }

  private catalogKeys(): string[] {
    return this.catalog.list().flatMap((t) => t.actions.map((a) => `${t.name}.${a.name}`)).sort();
  }

  /**
   * Replaces the org's set. `ifMatch` (the If-Match header): the set's ETag the change was made against; when another
   * PUT came first, 412 PRECONDITION_FAILED and nothing is written (see if-match.ts).
   */
  async replace(actor: Principal, orgId: string, items: ToolPermissionDto[], preconditions?: Preconditions): Promise<PermissionView[]> {
    const problems: string[] = [];
    const seen = new Set<string>();
    items.forEach((it, i) => {
      const key = `${it.toolName}.${it.action}`;
      // Named back only when it looks like a name: a token pasted as a toolName must not be repeated in the 400.
      const named = isEchoableFieldName(it.toolName) && isEchoableFieldName(it.action);
      if (!this.catalog.has(key)) {
        problems.push(
          named
            ? `items[${i}]: ${key} is not in the tool catalog`
            : `items[${i}]: its toolName.action (not named here as it does not look like a name) is not in the tool catalog (it has: ${this.catalogKeys().join(', ')})`,
        );
      }
      const unique = `${key}|${it.specialistId ?? ''}`;
      if (seen.has(unique)) problems.push(`items[${i}]: duplicate entry for ${named ? key : 'that toolName.action'}${it.specialistId ? ` (specialist ${it.specialistId})` : ''}`);
      seen.add(unique);
    });
    if (problems.length) throw new AppError('VALIDATION_FAILED', problems.join('; '), { fields: { errors: problems } });
    // The answer is read under the lock, before the commit: read after it, a PUT that committed
    // in between would answer this request with its own set.
    return this.ds.transaction(async (m) => {
      await m.query(LOCK_SQL, [permissionLock(orgId)]);
      // After the wait for that lock, so a revocation committed meanwhile is read (holdActorKey).
      await holdActorKey(managerQuery(m), actor);
      // Read after the lock (each statement of a READ COMMITTED transaction sees what committed before it): a PUT
      // that waited on another diffs against the set that one wrote, so consecutive events chain.
      const before = await this.list(orgId, m);
      assertPreconditions(preconditions, permissionsTag(before));
      await m.getRepository(ToolPermissionEntity).delete({ orgId });
      if (items.length) {
        const updatedAt = this.clock.now(); // the database's time, as the calls' and events' are
        await m.getRepository(ToolPermissionEntity).insert(
          items.map((it) => ({ id: newId(), orgId, toolName: it.toolName, action: it.action, specialistId: it.specialistId, enabled: it.enabled, updatedAt })),
        );
      }
      const after = await this.list(orgId, m);
      // Safe to record: every toolName.action was checked against the catalog above (the stored rows too, when
      // written: this is their only writer), and a specialistId matches the DTO's id pattern — the id run.created records.
      // setTag: the whole set the PUT left (its ETag, as GET answers it, unquoted), which the diff alone does not say:
      // ledger verify holds the org's rows to the last event's (firstPermissionOffLedger), reading no older event.
      await this.events.append(
        [
          {
            orgId,
            type: 'tool_permissions.changed',
            actor: actorOf(actor),
            metadata: { count: items.length, enabled: items.filter((i) => i.enabled).length, setTag: permissionsTag(after), ...diffPermissions(before, after) },
          },
        ],
        m,
      );
      return after;
    });
  }
}
