/**
 * A WHERE clause built from optional filters, every value a bind parameter,
 * plus the keyset condition and LIMIT of a "newest first" page. Shared by the
 * ledger, event and approval listings so they page the same way.
 */
export class KeysetQuery {
  readonly params: unknown[] = [];
  private readonly conditions: string[] = [];

  /** Adds `cond` with its value bound; `cond` receives the placeholder ($n). */
  where(cond: (placeholder: string) => string, value: unknown): this {
    this.params.push(value);
    this.conditions.push(cond(`$${this.params.length}`));
    return this;
  }

  /** Rows strictly after the cursor position in (created_at DESC, tiebreaker DESC) order. */
  after(position: { createdIso: string; key: string } | undefined, tiebreaker: string, tiebreakerType: 'uuid' | 'bigint'): this {
    if (!position) return this;
    this.params.push(position.createdIso, position.key);
    const n = this.params.length;
    this.conditions.push(`(created_at, ${tiebreaker}) < ($${n - 1}::timestamptz, $${n}::${tiebreakerType})`);
    return this;
  }

  /** `FROM … [WHERE …] ORDER BY created_at DESC, <tiebreaker> DESC LIMIT $n` for the given table. */
  page(table: string, tiebreaker: string, limit: number): string {
    this.params.push(limit);
    const where = this.conditions.length ? ` WHERE ${this.conditions.join(' AND ')}` : '';
    return `FROM ${table}${where} ORDER BY created_at DESC, ${tiebreaker} DESC LIMIT $${this.params.length}`;
  }
}
