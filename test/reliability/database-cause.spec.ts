import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../executor/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';

interface LogLine { level: number; msg?: string; correlationId?: string; code?: string; databaseCode?: string; databaseCause?: string; err?: unknown }

/** Every log line of one answer (its correlation id). */
function answerLines(logs: string[], from: number, correlationId: string): { line: LogLine; text: string }[] {
  return logs
    .slice(from)
    .flatMap((chunk) => chunk.split('\n'))
    .filter((text) => text.includes(correlationId))
    .map((text) => ({ line: JSON.parse(text) as LogLine, text }));
}

/**
 * A 503 DATABASE_UNAVAILABLE is logged with why: the SQLSTATE or the driver's error, and a phrase of ours for it. A
 * lock that makes every write hit statement_timeout looks like an outage from the answers alone (/readyz stays green);
 * the server's own message is never logged (it can quote the statement's values). It is one line, the answer's own
 * (an outage answers hundreds a second): no second warning beside it, no pino-http stack of "failed with status code".
 */
describe('a DATABASE_UNAVAILABLE answer\'s log line carries the cause', () => {
  let h: Harness;
  let direct: pg.Client;
  beforeAll(async () => {
    h = await startHarness({ DB_QUERY_TIMEOUT_MS: '2000' }); // statement_timeout 1 s: the server's cancel comes first
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
  });
  afterAll(async () => {
    await direct?.end();
    await h?.close();
  });

  it('a statement timeout behind a lock: code 57014 and "statement timeout", not the server message', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' })).status).toBe(200);
    const from = h.t.logs.length;
    await direct.query('BEGIN');
    await direct.query('LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE');
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    } finally {
      await direct.query('ROLLBACK');
    }
    expect([res.status, res.body.code]).toEqual([503, 'DATABASE_UNAVAILABLE']);
    // (The call's own line, "unsent call … not recorded yet", is about the call's row, not the answer.)
    const lines = answerLines(h.t.logs, from, res.headers['x-correlation-id'] as string).filter(({ line }) => !/^unsent call/.test(line.msg ?? ''));
    expect(lines.map(({ line }) => [line.level, line.msg, line.code, line.databaseCode, line.databaseCause])).toEqual([
      [50, 'request errored', 'DATABASE_UNAVAILABLE', '57014', 'statement timeout (a lock or a slow query), or cancelled by an operator'],
    ]);
    expect(lines[0].line.err).toBeUndefined();
    expect(lines[0].text).not.toMatch(/canceling statement|failed with status code/i);
  });
});
