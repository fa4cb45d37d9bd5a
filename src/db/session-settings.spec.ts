import { describe, expect, it } from 'vitest';
import { sessionSettingProblems, sessionSettingsMessage, statementTimeoutFor, statementTimeoutRange } from './session-settings.js';

const good = { dateStyle: 'ISO, MDY', isolation: 'read committed', statementTimeoutMs: 15_000, idleInTransactionTimeoutMs: 20_000 };

describe('the session settings a request pool needs', () => {
  it('what the gateway sends at connect passes, at every query timeout it takes', () => {
    for (const q of [1_000, 1_001, 2_000, 5_000, 20_000, 600_000]) {
      expect(sessionSettingProblems({ ...good, statementTimeoutMs: statementTimeoutFor(q), idleInTransactionTimeoutMs: q }, q)).toEqual([]);
    }
    expect(sessionSettingProblems({ ...good, dateStyle: 'ISO, DMY' }, 20_000)).toEqual([]); // the field order does not matter: ISO is read
  });

  it('names each setting that is not as needed, with the role setting that fixes it', () => {
    const problems = sessionSettingProblems({ dateStyle: 'SQL, DMY', isolation: 'serializable', statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0 }, 5_000);
    expect(problems).toEqual([
      { found: 'DateStyle is "SQL, DMY", not ISO', set: "DateStyle = 'ISO'" },
      { found: 'default_transaction_isolation is "serializable", not read committed', set: "default_transaction_isolation = 'read committed'" },
      { found: 'statement_timeout is 0 (none)', set: "statement_timeout = '4000ms'" },
      { found: 'idle_in_transaction_session_timeout is 0 (none)', set: "idle_in_transaction_session_timeout = '5000ms'" },
    ]);
  });

  it('a statement_timeout not at least 1 s under the client-side wait is a problem (a statement given up on could still commit), nor one of a few ms', () => {
    expect(sessionSettingProblems({ ...good, statementTimeoutMs: 19_999 }, 20_000).map((p) => p.found)).toEqual([
      'statement_timeout is 19999 ms; with DB_QUERY_TIMEOUT_MS 20000 ms it must be between 1000 and 19000 ms',
    ]);
    expect(sessionSettingProblems({ ...good, statementTimeoutMs: 60_000 }, 20_000)).toHaveLength(1);
    expect(sessionSettingProblems({ ...good, statementTimeoutMs: 15 }, 20_000).map((p) => p.set)).toEqual(["statement_timeout = '15000ms'"]); // '15' for 15 s
    for (const st of [1_000, 19_000]) expect(sessionSettingProblems({ ...good, statementTimeoutMs: st }, 20_000), String(st)).toEqual([]);
    expect(statementTimeoutRange(1_000)).toEqual({ min: 500, max: 500 }); // the least DB_QUERY_TIMEOUT_MS: half of it, as the gateway sends
    expect(sessionSettingProblems({ ...good, idleInTransactionTimeoutMs: 50 }, 20_000).map((p) => p.found)).toEqual([
      'idle_in_transaction_session_timeout is 50 ms, under 1000 ms',
    ]);
    expect(sessionSettingProblems({ ...good, isolation: 'repeatable read' }, 20_000).map((p) => p.set)).toEqual(["default_transaction_isolation = 'read committed'"]);
  });

  it('the message says why, per mode, and lists one ALTER ROLE per missing setting; none missing is no message', () => {
    const problems = sessionSettingProblems({ ...good, statementTimeoutMs: 0 }, 20_000);
    expect(sessionSettingsMessage(problems, 'pooled')).toBe(
      'the database sessions do not have the settings the gateway needs (statement_timeout is 0 (none)), and with DB_CONNECTION_MODE=pooled it does ' +
        "not send them. Set them on the gateway's role, connected as that role: ALTER ROLE CURRENT_USER SET statement_timeout = '15000ms'; " +
        'Then have any pooler in between open new server connections (PgBouncer: RECONNECT on its admin console, or a restart; RELOAD keeps the ones it has); see README "Running against your own PostgreSQL"',
    );
    expect(sessionSettingsMessage(problems, 'direct')).toMatch(/^the database sessions do not have the settings the gateway sends at connect \(statement_timeout is 0 \(none\)\): something between/);
    expect(sessionSettingsMessage([], 'pooled')).toBeNull();
  });
});
