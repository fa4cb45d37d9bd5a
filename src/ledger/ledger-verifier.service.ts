import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CREATED_ISO_SQL, eventHash, GENESIS_HASH } from './ledger-chain.js';
import { LedgerSealerService } from './ledger-sealer.service.js';

export type VerifyResult =
  | { ok: true; checked: number; headHash: string | null }
  | { ok: false; checked: number; brokenAt: { chainSeq: number; eventId: string | null; reason: string } };

const PAGE = 5_000;

/** Anything that runs a parameterised query: a DataSource, an EntityManager, a pg client wrapper. */
export interface ChainReader {
  query(sql: string, params: unknown[]): Promise<unknown>;
}

/**
 * Recomputes an org's sealed hash chain from the stored events, page by page,
 * and reports the first position where it breaks (a changed, missing or
 * reordered event). Pure of Nest, so the ledger:verify CLI runs the same code.
 */
export async function verifyOrgChain(db: ChainReader, orgId: string): Promise<VerifyResult> {
  let prev = GENESIS_HASH;
  let expected = 1;
  let checked = 0;
  for (;;) {
    const rows = (await db.query(
      `SELECT id, org_id, chain_seq, type, run_id, tool_call_id, actor, metadata, prev_hash, hash, ${CREATED_ISO_SQL} AS created_iso
         FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq >= $2 ORDER BY chain_seq LIMIT ${PAGE}`,
      [orgId, expected],
    )) as {
      id: string; org_id: string; chain_seq: string; type: string; run_id: string | null; tool_call_id: string | null;
      actor: unknown; metadata: unknown; prev_hash: string; hash: string; created_iso: string;
    }[];
    for (const r of rows) {
      const chainSeq = Number(r.chain_seq);
      if (chainSeq !== expected) {
        return { ok: false, checked, brokenAt: { chainSeq: expected, eventId: null, reason: 'event missing from the chain' } };
      }
      if (r.prev_hash !== prev) {
        return { ok: false, checked, brokenAt: { chainSeq, eventId: r.id, reason: 'prev_hash does not match the previous event' } };
      }
      const hash = eventHash(prev, {
        id: r.id, orgId: r.org_id, chainSeq, type: r.type, runId: r.run_id, toolCallId: r.tool_call_id,
        actor: r.actor, metadata: r.metadata, createdIso: r.created_iso,
      });
      if (hash !== r.hash) {
        return { ok: false, checked, brokenAt: { chainSeq, eventId: r.id, reason: 'event content does not match its hash' } };
      }
      prev = hash;
      expected++;
      checked++;
    }
    if (rows.length < PAGE) break;
  }
  // Rows the walk above cannot see, which the sealer never produces: sealed-looking rows off the
  // chain (a hash without a position, a position below 1) and half-sealed ones. Only a write
  // around the gateway makes them, and they would still show in listings and a call's history.
  const [stray] = (await db.query(
    `SELECT id FROM runtime_ledger_events
      WHERE org_id = $1 AND ((chain_seq IS NULL) <> (hash IS NULL) OR (chain_seq IS NULL) <> (prev_hash IS NULL) OR chain_seq < 1)
      ORDER BY seq LIMIT 1`,
    [orgId],
  )) as { id: string }[];
  if (stray) return { ok: false, checked, brokenAt: { chainSeq: 0, eventId: stray.id, reason: 'event outside the chain' } };
  return { ok: true, checked, headHash: checked ? prev : null };
}

/** Seals what is committed, then recomputes an org's hash chain. */
@Injectable()
export class LedgerVerifierService {
  constructor(
    private readonly ds: DataSource,
    private readonly sealer: LedgerSealerService,
  ) {}

  async verify(orgId: string): Promise<VerifyResult> {
    await this.sealer.sealNow();
    return verifyOrgChain(this.ds, orgId);
  }
}
