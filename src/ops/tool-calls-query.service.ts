import { Readable } from 'node:stream';
import { Injectable, StreamableFile } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal.js';
import { notFound } from '../common/errors/app-error.js';
import { isUuid } from '../common/ids.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { toToolCallView, type ToolCallView } from '../tool-calls/tool-call.view.js';
import { filterHash, LedgerCursorCodec, type CursorPosition } from './ledger-cursor.js';
import { parseQueryTimestamp } from './ledger-time.js';
import { DEFAULT_PAGE, listingScope, scopeKey } from './ops-scope.js';
import type { ToolCallFiltersQuery, ToolCallExportQuery, ToolCallListQuery } from './ops.dto.js';
import { csvHeader, EXPORT_CONTENT_TYPES, exportChunk } from './tool-calls-export.format.js';
import { loadToolCallStory, type ToolCallStory } from './tool-call-story.js';
import { toolCallByIdSql, toolCallEntityOf, toolCallsPageSql, type ToolCallFilters, type ToolCallRow } from './tool-calls.sql.js';

const EXPORT_BATCH = 500;

export interface ToolCallPage {
  items: ToolCallView[];
  nextCursor: string | null;
}

function filtersOf(q: ToolCallFiltersQuery): ToolCallFilters {
  return {
    runId: q.runId,
    status: q.status,
    toolName: q.toolName,
    action: q.action,
    errorCode: q.errorCode,
    correlationId: q.correlationId,
    since: parseQueryTimestamp('since', q.since),
    until: parseQueryTimestamp('until', q.until),
  };
}

/** Ops' read side of the tool-call ledger: filtered keyset pages, one call's whole story, and the export. */
@Injectable()
export class ToolCallsQueryService {
  constructor(
    private readonly ds: DataSource,
    private readonly scope: OrgScopeService,
    private readonly cursors: LedgerCursorCodec,
  ) {}

  async list(p: Principal, q: ToolCallListQuery): Promise<ToolCallPage> {
    const filters = filtersOf(q);
    const orgId = await listingScope(this.scope, p, q.orgId);
    const hash = filterHash({ ...filters });
    const after = q.cursor === undefined ? undefined : this.cursors.decode(q.cursor, 'tool-calls', scopeKey(orgId), hash);
    const limit = q.limit ?? DEFAULT_PAGE;
    const rows = await this.page(orgId, filters, after, limit + 1);
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const nextCursor =
      rows.length > limit && last ? this.cursors.encode('tool-calls', scopeKey(orgId), hash, { createdIso: last.created_iso, key: last.id }) : null;
    return { items: items.map((r) => toToolCallView(toolCallEntityOf(r))), nextCursor };
  }

  async get(p: Principal, id: string): Promise<ToolCallView & ToolCallStory> {
    if (!isUuid(id)) throw notFound('tool call');
    const { sql, params } = toolCallByIdSql(p.orgId, id);
    const [row] = (await this.ds.query(sql, params)) as ToolCallRow[];
    if (!row) throw notFound('tool call');
    const story = await loadToolCallStory(this.ds, row.org_id, row.id, row.policy_decision_id);
    return { ...toToolCallView(toolCallEntityOf(row)), ...story };
  }

  /**
   * Streams every matching row, newest first, a keyset batch at a time (never
   * the whole set in memory). The first batch is read before answering, so
   * scope, validation and database errors still get a problem+json; a failure
   * later aborts the response rather than ending a truncated file cleanly.
   */
  async export(p: Principal, q: ToolCallExportQuery): Promise<StreamableFile> {
    const filters = filtersOf(q);
    const orgId = await listingScope(this.scope, p, q.orgId);
    const first = await this.page(orgId, filters, undefined, EXPORT_BATCH);
    const batches = this.batches(orgId, filters, first);
    const format = q.format;
    async function* text(): AsyncGenerator<string> {
      if (format === 'csv') yield csvHeader();
      for await (const rows of batches) yield exportChunk(format, rows.map((r) => toToolCallView(toolCallEntityOf(r))));
    }
    return new StreamableFile(Readable.from(text()), {
      type: EXPORT_CONTENT_TYPES[format],
      disposition: `attachment; filename="tool-calls.${format}"`,
    });
  }

  private async *batches(orgId: string | null, filters: ToolCallFilters, first: ToolCallRow[]): AsyncGenerator<ToolCallRow[]> {
    let rows = first;
    for (;;) {
      if (rows.length) yield rows;
      if (rows.length < EXPORT_BATCH) return;
      const last = rows[rows.length - 1];
      rows = await this.page(orgId, filters, { createdIso: last.created_iso, key: last.id }, EXPORT_BATCH);
    }
  }

  private async page(orgId: string | null, filters: ToolCallFilters, after: CursorPosition | undefined, limit: number): Promise<ToolCallRow[]> {
    const { sql, params } = toolCallsPageSql(orgId, filters, after, limit);
    return (await this.ds.query(sql, params)) as ToolCallRow[];
  }
}
