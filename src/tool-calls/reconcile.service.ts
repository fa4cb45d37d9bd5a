import { Injectable } from '@nestjs/common';
import type { Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { isUuid } from '../common/ids.js';
import { Sql } from '../db/sql.js';
import { assertTransition } from './tool-call-lifecycle.js';

export interface ReconcileInput {
  status: 'succeeded' | 'failed';
  note: string;
}

/**
 * Ops settle an `indeterminate` call after checking with the vendor. The only
 * change a terminal-ish state allows (indeterminate → succeeded | failed); the
 * note is kept on the row, the event records who and what, not the note.
 */
@Injectable()
export class ReconcileService {
  constructor(private readonly sql: Sql) {}

  async reconcile(p: Principal, id: string, input: ReconcileInput) {
    assertTransition('indeterminate', input.status);
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'tool call not found');
    const [existing] = await this.sql.query<{ org_id: string; status: string }>('SELECT org_id, status FROM tool_calls WHERE id = $1', [id]);
    if (!existing || (p.orgId !== null && existing.org_id !== p.orgId)) throw new AppError('NOT_FOUND', 'tool call not found');
    const rows = await this.sql.query<{ id: string }>(
      `WITH tc AS (
         UPDATE tool_calls SET status = $2, note = $3, updated_at = now(), finished_at = coalesce(finished_at, now()),
                error_code = CASE WHEN $2 = 'succeeded' THEN NULL ELSE error_code END
          WHERE id = $1 AND status = 'indeterminate'
          RETURNING id, org_id, run_id, tool_name, action, action_digest),
       ev AS (
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
         SELECT gen_random_uuid(), org_id, 'tool_call.reconciled', run_id, id, $4::jsonb,
                jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'from', 'indeterminate', 'to', $2::text)
           FROM tc)
       SELECT id FROM tc`,
      [id, input.status, input.note, JSON.stringify({ keyId: p.keyId, role: p.role })],
    );
    if (rows.length === 0) throw new AppError('NOT_RECONCILABLE', `only an indeterminate call can be reconciled (this one is ${existing.status})`);
    return { id, status: input.status, note: input.note };
  }
}
