import { Injectable } from '@nestjs/common';
import { actorOf, type Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { isUuid } from '../common/ids.js';
import { Sql } from '../db/sql.js';
import { redactFreeText } from '../redaction/redaction.service.js';
import { httpStatusFor } from './tool-call-body.js';
import { assertTransition } from './tool-call-lifecycle.js';
import { clientQuery, holdActorKey } from '../auth/actor-key-hold.js';

export interface ReconcileInput {
  status: 'succeeded' | 'failed';
  note: string;
}

/**
 * The error code of a call ops settled as failed. API.md §4 lists
 * OUTCOME_UNKNOWN for `indeterminate` only and has no reconcile-specific code:
 * once an operator has checked with the vendor and found the action did not
 * take effect, the call failed at the vendor, which §4 reports as
 * VENDOR_ERROR (the generic "vendor failed"). What sets it apart from a
 * VENDOR_ERROR the vendor answered is on the row (the ops `note`, the error
 * text below), in the `tool_call.reconciled` event, and in the model-facing
 * content (tool-call-body.ts: "an operator checked … did not take effect").
 * A call settled as succeeded has errorCode null and errorText null, like any
 * success; the operator's note stays in `note` (API.md does not put it in
 * errorText), and its model-facing content says an operator confirmed it and
 * that no result is available (none was ever received, so none was stored).
 */
export const RECONCILED_FAILED_CODE = 'VENDOR_ERROR';
export const RECONCILED_FAILED_TEXT = 'settled as failed by an operator after checking with the vendor';

/**
 * Ops settle an `indeterminate` call after checking with the vendor. The only
 * change a terminal-ish state allows (indeterminate → succeeded | failed); the
 * note is kept on the row (a non-null `note` is how the tool-call body knows
 * a call was reconciled), the event records who and what, and the note's
 * SHA-256 (`noteDigest`): the note is the operator's evidence, and ledger
 * verify finds it rewritten, without free text entering the chain.
 * POST /v1/tool-calls/:id/reconcile: `failed` → errorCode VENDOR_ERROR with an
 * errorText saying an operator settled it; `succeeded` → errorCode and
 * errorText null (see RECONCILED_FAILED_CODE). Sent again with the status and
 * note the call was settled with, it is answered again (a client retrying a
 * lost answer); any other settlement of a settled call is 409.
 */
@Injectable()
export class ReconcileService {
  constructor(private readonly sql: Sql) {}

  async reconcile(p: Principal, id: string, given: ReconcileInput) {
    assertTransition('indeterminate', given.status);
    // Free text shown back to ops and kept on the row: a credential pasted into it goes as it would from a tool's input.
    const input = { ...given, note: redactFreeText(given.note) };
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'tool call not found');
    const [existing] = await this.sql.query<{ org_id: string; status: string }>('SELECT org_id, status FROM tool_calls WHERE id = $1', [id]);
    if (!existing || (p.orgId !== null && existing.org_id !== p.orgId)) throw new AppError('NOT_FOUND', 'tool call not found');
    const errorCode = input.status === 'failed' ? RECONCILED_FAILED_CODE : null;
    // The failed text keeps why the call was indeterminate (our own safe text, never the note or vendor text).
    const rows = await this.sql.transaction(async (client) => {
      const { rows: updated } = await client.query<{ id: string }>(
        `WITH tc AS (
           UPDATE tool_calls SET status = $2, note = $3, updated_at = now(), finished_at = coalesce(finished_at, now()),
                  error_code = $5::text, http_status = $6,
                  error_text = CASE WHEN $2 = 'succeeded' THEN NULL
                                    ELSE $7::text || coalesce(' (it was indeterminate: ' || left(error_text, 300) || ')', '') END
            WHERE id = $1 AND status = 'indeterminate'
            RETURNING id, org_id, run_id, tool_name, action, action_digest),
         ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id),
         -- A Shopify refund left indeterminate keeps its order's refund lease (it may still run there) until the lease
         -- expires. Seen done at Shopify (succeeded) it no longer runs, and the order's next refund need not wait; not
         -- seen (failed) it may yet land, so its lease runs out as it would have.
         sl AS (DELETE FROM shopify_refund_leases l USING tc WHERE l.holder = tc.id AND $2 = 'succeeded'),
         -- A late answer's result is kept for a reconcile as succeeded to hand out; failed, no one can ever read it.
         rd AS (DELETE FROM tool_call_results r USING tc WHERE r.tool_call_id = tc.id AND $2 = 'failed'),
         ev AS (
           INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
           SELECT gen_random_uuid(), org_id, 'tool_call.reconciled', run_id, id, $4::jsonb,
                  jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'from', 'indeterminate', 'to', $2::text,
                                     'errorCode', $5::text, 'noteDigest', encode(sha256(convert_to($3::text, 'UTF8')), 'hex'))
             FROM tc)
         SELECT id FROM tc`,
        [id, input.status, input.note, JSON.stringify(actorOf(p)), errorCode, httpStatusFor(input.status, errorCode), RECONCILED_FAILED_TEXT],
      );
      // After the UPDATE, which may have waited for another reconcile: a revocation committed meanwhile is read.
      await holdActorKey(clientQuery(client), p);
      return updated;
    });
    if (rows.length === 0) {
      // The status as it is now: read before the UPDATE, it still said indeterminate when another reconcile won the race.
      const [current] = await this.sql.query<{ status: string; note: string | null }>('SELECT status, note FROM tool_calls WHERE id = $1', [id]);
      // The same settlement sent again (its answer was lost): answered again, with nothing written a second time.
      if (current && current.status === input.status && current.note === input.note) return { id, status: input.status, note: input.note };
      throw new AppError('NOT_RECONCILABLE', `only an indeterminate call can be reconciled (this one is ${current?.status ?? existing.status})`);
    }
    return { id, status: input.status, note: input.note };
  }
}
