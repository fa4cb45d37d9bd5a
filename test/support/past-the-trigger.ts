import pg from 'pg';

/**
 * A superuser's connection past the ledger's append-only trigger (`session_replication_role = replica`, foreign keys
 * off too), as the table's owner or a superuser can be: for specs of what verify and the sealer make of rows written
 * around the gateway. Each statement, or each `transaction`, commits on its own.
 */
export class PastTheTrigger {
  private constructor(private readonly su: pg.Client) {}

  static async connect(): Promise<PastTheTrigger> {
    const su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
    return new PastTheTrigger(su);
  }

  query(sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
    return this.transaction((q) => q(sql, params));
  }

  async transaction<T>(work: (query: (sql: string, params?: unknown[]) => Promise<pg.QueryResult>) => Promise<T>): Promise<T> {
    await this.su.query('BEGIN');
    try {
      await this.su.query('SET LOCAL session_replication_role = replica');
      const out = await work((sql, params = []) => this.su.query(sql, params));
      await this.su.query('COMMIT');
      return out;
    } catch (err) {
      await this.su.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  end(): Promise<void> {
    return this.su.end();
  }
}
