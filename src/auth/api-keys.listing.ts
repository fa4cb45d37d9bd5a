import { CREATED_ISO_SQL } from '../ledger/ledger-chain.js';
import type { CursorKind } from '../ops/ledger-cursor.js';
import type { ApiKeyEntity, Role } from './api-key.entity.js';

export interface ApiKeyView {
  id: string;
  orgId: string | null;
  role: Role;
  name: string;
  keyPrefix: string;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

export interface ApiKeyPage {
  items: ApiKeyView[];
  nextCursor: string | null;
}

/** A listed row: the entity's fields (view reads it), plus where the cursor continues. */
export type ApiKeyRow = Pick<ApiKeyEntity, 'id' | 'orgId' | 'role' | 'name' | 'keyPrefix' | 'createdAt' | 'revokedAt' | 'lastUsedAt'> & {
  /** created_at to the microsecond, as the cursor keeps it */
  created_iso: string;
};

export const LIST_COLUMNS =
  `id, org_id AS "orgId", role, name, key_prefix AS "keyPrefix", created_at AS "createdAt", revoked_at AS "revokedAt", ` +
  `last_used_at AS "lastUsedAt", ${CREATED_ISO_SQL} AS created_iso`;

/** The cursor kind of this listing: a cursor of another listing is refused here and vice versa. */
export const API_KEYS_CURSOR: CursorKind = 'api-keys';

export const view = (k: Omit<ApiKeyRow, 'created_iso'>): ApiKeyView => ({
  id: k.id,
  orgId: k.orgId,
  role: k.role,
  name: k.name,
  keyPrefix: k.keyPrefix,
  createdAt: k.createdAt.toISOString(),
  revokedAt: k.revokedAt?.toISOString() ?? null,
  lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
});
