import { Readable } from 'node:stream';
import { Injectable, Logger, StreamableFile } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ApprovalExpiries } from '../approvals/approval-expiries.js';
import { EXPIRY_BATCH, settleApprovalsSql, type SettledApproval } from '../approvals/approval-settle.sql.js';
import { KeyRateLimiter, RESULT_BYTES_PER_TOKEN } from '../auth/key-rate-limiter.js';
import { morePages, rowBytes } from '../db/sized-page.js';
import type { Principal } from '../auth/principal.js';
import { Clock } from '../common/clock.js';
import { notFound } from '../common/errors/app-error.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { retryOnDeadlock } from '../common/errors/database-errors.js';
import { isUuid } from '../common/ids.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { ToolCallsService } from '../tool-calls/tool-calls.service.js';
import { toToolCallView, type ToolCallView } from '../tool-calls/tool-call.view.js';
import { filterHash, LedgerCursorCodec, type CursorPosition } from './ledger-cursor.js';
import { assertTimeWindow, parseQueryTimestamp } from './ledger-time.js';
import { DEFAULT_PAGE, listingScope, scopeKey } from './ops-scope.js';
import type { ToolCallFiltersQuery, ToolCallExportQuery, ToolCallListQuery } from './ops.dto.js';
import { csvHeader, EXPORT_CONTENT_TYPES, exportChunks, incompleteExportLine } from './tool-calls-export.format.js';
import { loadToolCallStory, type ToolCallStory } from './tool-call-story.js';
import { LIST_PAGE_BYTES, toolCallByIdSql, toolCallEntityOf, toolCallsSizedPageSql, type SizedToolCallRow, type ToolCallFilters, type ToolCallRow } from './tool-calls.sql.js';

/**
 * How long a read settles a backlog of overdue approvals before answering (expireOverdueApprovalsOf): a batch of
 * EXPIRY_BATCH takes about half a second on a loaded ledger, so a read waits two or three at most.
 */
const READ_EXPIRY_BUDGET_MS = 1_000;
/** Rows an export batch reads at most. */
const EXPORT_BATCH = 500;
/** Fewest rows a batch after one cut by size asks for (see batches). */
const EXPORT_BATCH_MIN = 4;
/**
 * Redacted input and output (jsonb text) an export batch reads at most; one row larger than that comes alone.
 * Outputs are capped at 64 KiB when written (LEDGER_OUTPUT_MAX_BYTES), inputs by the 512 KiB body limit, rows written
 * before the cap up to ~1.6 MB: without this a batch of 500 could be hundreds of MB of parsed jsonb in one process.
 */
const EXPORT_BATCH_BYTES = 8 * 1024 * 1024;

/** A keyset page cut by size: its rows, whether rows may follow the last, and their redacted input and output bytes. */
interface SizedPage {
  rows: SizedToolCallRow[];
  more: boolean;
  bytes: number;
}

export interface ToolCallPage {
  items: ToolCallView[];
  nextCursor: string | null;
}

function filtersOf(q: ToolCallFiltersQuery): ToolCallFilters {
  const f: ToolCallFilters = {
    runId: q.runId,
    status: q.status,
    toolName: q.toolName,
    action: q.action,
    errorCode: q.errorCode,
    correlationId: q.correlationId,
    since: parseQueryTimestamp('since', q.since),
    until: parseQueryTimestamp('until', q.until),
  };
  assertTimeWindow('since', f.since, 'until', f.until);
  return f;
}

/** Ops' read side of the tool-call ledger: filtered keyset pages, one call's whole story, and the export. */
@Injectable()
export class ToolCallsQueryService {
  private readonly log = new Logger('ToolCallsExport');
  constructor(
    private readonly ds: DataSource,
    private readonly scope: OrgScopeService,
    private readonly cursors: LedgerCursorCodec,
    private readonly calls: ToolCallsService,
    private readonly clock: Clock,
    private readonly expiries: ApprovalExpiries,
    private readonly limiter: KeyRateLimiter,
  ) {}

  async list(p: Principal, q: ToolCallListQuery): Promise<ToolCallPage> {
    const filters = filtersOf(q);
    const orgId = await listingScope(this.scope, p, q.orgId);
    const hash = filterHash({ ...filters });
    const after = q.cursor === undefined ? undefined : this.cursors.decode(q.cursor, 'tool-calls', scopeKey(orgId), hash);
    const limit = q.limit ?? DEFAULT_PAGE;
    await this.expireOverdueApprovals(orgId, filters);
    // README (RATE_LIMIT_RPS): a page of up to LIST_PAGE_BYTES costs the key a token per RESULT_BYTES_PER_TOKEN of its
    // rows beyond the first, once it is built and before it is sent, as debt as a replay is (KeyRateLimiter.chargeListing),
    // and a key's pages are built one at a time (listingTurn). At a token a page, one key within its burst had the
    // gateway read, parse and send hundreds of MB at once, every other org's requests (health included) waiting behind it.
    const { rows, more } = await this.limiter.listingTurn(
      p.keyId, 'page', () => this.page(orgId, filters, after, limit + 1, LIST_PAGE_BYTES), (built) => rowBytes(built.rows.slice(0, limit)),
    );
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const nextCursor =
      (rows.length > limit || more) && last ? this.cursors.encode('tool-calls', scopeKey(orgId), hash, { createdIso: last.created_iso, key: last.id }) : null;
    return { items: items.map((r) => toToolCallView(toolCallEntityOf(r))), nextCursor };
  }

  async get(p: Principal, id: string): Promise<ToolCallView & ToolCallStory> {
    if (!isUuid(id)) throw notFound('tool call');
    // Read before the settle below, which reads it again: an approval the story shows expired at this time
    // was overdue when the settle looked, so the call beside it is not shown waiting_approval.
    const nowMs = this.clock.nowMs();
    let row = await this.row(p.orgId, id);
    if (!row) throw notFound('tool call');
    // README "reads show it expired from the moment it passes": a call waiting for an approval past its expiry is
    // settled first, as GET …/result does (StoredCallAnswers.expireIfOverdue), not shown waiting until the sweep.
    if (row.status === 'waiting_approval') {
      const stored = await this.calls.findById(row.org_id, row.id);
      if (stored && (await this.calls.expireIfOverdue(stored)).status !== 'waiting_approval') row = (await this.row(p.orgId, id)) ?? row;
    }
    const story = await loadToolCallStory(this.ds, row.org_id, row.id, row.policy_decision_id, nowMs);
    return { ...toToolCallView(toolCallEntityOf(row)), ...story };
  }

  private async row(orgId: string | null, id: string): Promise<ToolCallRow | undefined> {
    const { sql, params } = toolCallByIdSql(orgId, id);
    const [row] = (await this.ds.query(sql, params)) as ToolCallRow[];
    return row;
  }

  /**
   * Before a listing or export that could hold a call waiting for an approval past its expiry (or the blocked /
   * APPROVAL_EXPIRED call it becomes), the overdue approvals in scope are written down, with the sweep's statement
   * for this org (every org for a platform key): such a call is not listed waiting_approval until the sweep, nor
   * missing under status=blocked. Read off the pending-expiry index; nothing to write is the usual case.
   * A backlog (replicas down for a while, a burst's expiry) is settled a batch per statement for up to
   * READ_EXPIRY_BUDGET_MS, like the sweep: in one statement it could outlast the statement timeout on every read
   * (503, rolled back, and again on the next). Past the budget the read goes on, and the sweep settles the rest.
   * An approval another session holds (a decision's transaction, the sweep's batch, a long transaction) is skipped,
   * not waited for (skipLocked, settleApprovalsSql): the read answers, the approval shown expired, and the holder or
   * the sweep writes it down.
   */
  private async expireOverdueApprovals(orgId: string | null, f: ToolCallFilters): Promise<void> {
    if (f.status !== undefined && f.status !== 'waiting_approval' && f.status !== 'blocked') return;
    if (f.errorCode !== undefined && f.errorCode !== 'APPROVAL_EXPIRED') return;
    await this.expireOverdueApprovalsOf(orgId);
  }

  /** The overdue approvals of an org (every org: null) written down now, as the sweep would; usage reads them so too. */
  async expireOverdueApprovalsOf(orgId: string | null): Promise<void> {
    const deadline = performance.now() + READ_EXPIRY_BUDGET_MS;
    for (;;) {
      // Sent again if it lost a deadlock (rolled back whole; it settles only approvals still pending).
      const settled = await retryOnDeadlock(
        () =>
          this.ds.query(settleApprovalsSql('expired', { batched: true, skipLocked: true }), [orgId, 'expired', this.clock.now(), null, null, null, EXPIRY_BATCH]) as Promise<SettledApproval[]>,
      );
      this.expiries.recorded(settled); // and wakes the long-polls on those calls
      if (settled.length < EXPIRY_BATCH || performance.now() >= deadline) return;
    }
  }

  /**
   * Streams every matching row, newest first, a keyset batch at a time (never
   * the whole set in memory, nor a batch of large rows: EXPORT_BATCH_BYTES), as
   * chunks of text of about 64 K characters. The first batch is read before answering, so
   * scope, validation and database errors still get a problem+json; a failure
   * later aborts the response rather than ending a truncated file cleanly.
   * `closeDelimited` (HTTP/1.0, as nginx's default proxy_http_version speaks it): there a body ends only by the
   * connection's close, so an abort looks like the end of a complete file. The file ends instead with a last line
   * saying it is incomplete (incompleteExportLine), after a database failure, and when `beforeBackstop` fires (HttpDrain:
   * the gateway is stopping and is about to close every connection left). Then the export stops between two chunks,
   * or without waiting for the batch it is reading, and ends normally, so that line leaves before the connection
   * closes. Over HTTP/1.1 the backstop's abort (no last chunk) tells the client already.
   */
  async export(p: Principal, q: ToolCallExportQuery, closeDelimited = false, beforeBackstop?: AbortSignal): Promise<StreamableFile> {
    const filters = filtersOf(q);
    const orgId = await listingScope(this.scope, p, q.orgId);
    await this.expireOverdueApprovals(orgId, filters);
    // Read and charged in the key's turn (listingTurn), as a list page is.
    const first = await this.limiter.listingTurn(p.keyId, 'export', () => this.page(orgId, filters, undefined, EXPORT_BATCH, EXPORT_BATCH_BYTES), (batch) => batch.bytes);
    // README (RATE_LIMIT_RPS): an export costs the key a token per RESULT_BYTES_PER_TOKEN it streams beyond the first.
    // The first batch is charged by its rows' size before the answer starts (a key already in debt, as concurrent
    // exports leave it, is 429 and nothing is sent); the stream then charges the bytes it sends beyond that as it goes,
    // as debt: a body under way cannot be refused, so the key's next requests wait for what it owes.
    const { keyId } = p;
    const limiter = this.limiter;
    let charged = Math.floor(first.bytes / RESULT_BYTES_PER_TOKEN);
    let streamed = 0;
    const charge = (chunk: string): string => {
      streamed += Buffer.byteLength(chunk);
      const due = Math.floor(streamed / RESULT_BYTES_PER_TOKEN) - charged;
      if (due > 0) {
        limiter.owe(keyId, due);
        charged += due;
      }
      return chunk;
    };
    const batches = this.batches(orgId, filters, first, keyId);
    const format = q.format;
    const log = this.log;
    const windUp = closeDelimited ? beforeBackstop : undefined;
    async function* text(): AsyncGenerator<string> {
      if (format === 'csv') yield charge(csvHeader());
      let sent = 0;
      let stopping = false;
      try {
        while (!stopping) {
          // The batch query is not waited for once the stop comes (it may take up to the statement timeout, past the
          // backstop): it ends on its own, and its failure, if any, is no one's to hear (orStopping handles it).
          const batch = windUp ? await orStopping(batches.next(), windUp) : await batches.next();
          if (batch === STOPPING) stopping = true;
          else if (batch.done) return;
          else {
            for (const chunk of exportChunks(format, batch.value.map((r) => toToolCallView(toolCallEntityOf(r))))) {
              // Between two chunks, each of whole rows: the file never ends in the middle of one.
              if (windUp?.aborted) {
                stopping = true;
                break;
              }
              yield charge(chunk.text);
              sent += chunk.rows;
            }
          }
        }
        log.warn(`tool-call export stopped after ${sent} rows: the gateway is stopping; the HTTP/1.0 file ends with a line saying so`);
        yield incompleteExportLine(format, sent, 'stopping');
      } catch (err) {
        const revoked = err instanceof ExportKeyRevoked;
        if (revoked) log.warn(`tool-call export stopped after ${sent} rows: its API key was revoked`);
        if (!closeDelimited) throw err; // chunked: the abort (no last chunk) tells the client
        if (!revoked) log.error(`tool-call export stopped after ${sent} rows; the HTTP/1.0 file ends with a line saying so: ${loggableErrorText(err)}`);
        yield incompleteExportLine(format, sent, revoked ? 'revoked' : 'database');
      } finally {
        // Not awaited: after a stop it settles only once the batch query left running ends.
        batches.return(undefined).catch(() => undefined);
      }
    }
    return new StreamableFile(Readable.from(text()), {
      type: EXPORT_CONTENT_TYPES[format],
      disposition: `attachment; filename="tool-calls.${format}"`,
    });
  }

  /**
   * After a batch cut by size the next asks for about twice the rows that fitted, growing back to EXPORT_BATCH when
   * rows are small again: each batch sizes every row it reads, so a run of large rows is not sized 500 at a time.
   * Each batch after the first is read only while the export's key is live: the request was authenticated once, and
   * an export of a large ledger streams for minutes, so one begun just before its key's revocation (on any replica)
   * stops at its next batch instead of handing out the rest of the org's ledger (ExportKeyRevoked).
   */
  private async *batches(orgId: string | null, filters: ToolCallFilters, first: SizedPage, keyId: string): AsyncGenerator<ToolCallRow[]> {
    let batch = first;
    for (;;) {
      const last = batch.rows.at(-1);
      if (last) yield batch.rows;
      if (!batch.more || !last) return;
      const limit = Math.min(EXPORT_BATCH, Math.max(EXPORT_BATCH_MIN, batch.rows.length * 2));
      const [key] = (await this.ds.query('SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL', [keyId])) as unknown[];
      if (!key) throw new ExportKeyRevoked();
      batch = await this.page(orgId, filters, { createdIso: last.created_iso, key: last.id }, limit, EXPORT_BATCH_BYTES);
    }
  }

  /** Up to `limit` rows after `after`, fewer once they hold `budgetBytes` (toolCallsSizedPageSql). */
  private async page(orgId: string | null, filters: ToolCallFilters, after: CursorPosition | undefined, limit: number, budgetBytes: number): Promise<SizedPage> {
    const { sql, params } = toolCallsSizedPageSql(orgId, filters, after, limit, budgetBytes);
    const rows = (await this.ds.query(sql, params)) as SizedToolCallRow[];
    return { rows, more: morePages(rows, limit), bytes: rowBytes(rows) };
  }
}

/** The export's API key was found revoked before its next batch. */
class ExportKeyRevoked extends Error {
  constructor() {
    super('the API key of this export was revoked');
  }
}

/** What an export's wait for its next batch gives when the gateway's stop overtakes it. */
const STOPPING = Symbol('stopping');

/**
 * `work`'s value, or STOPPING if `signal` aborts first; `work`'s failure after that is handled here (no one waits for
 * it). One listener per wait, removed once `work` settles: a promise raced against on every batch and kept pending for
 * the whole export would hold a reaction per race, and with it every batch already sent (V8 keeps each race's result
 * reachable from the long-lived promise), the whole export in memory.
 */
function orStopping<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof STOPPING> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.resolve(STOPPING);
  }
  return new Promise<T | typeof STOPPING>((resolve, reject) => {
    const onAbort = (): void => resolve(STOPPING);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** The redacted input and output bytes of rows read by toolCallsSizedPageSql. */
