import { describe, expect, it } from 'vitest';
import { manifestDigest } from '../runs/run-manifest.js';
import { runMismatch, type RunEvent, type RunRow } from './run-check.js';

const KEY = '11111111-1111-4111-8111-111111111111';
const event = (type: string, extra: Partial<RunEvent> = {}): RunEvent => ({
  id: `${type}-id`, chainSeq: 1, type, specialistId: null, allowedToolCount: null, manifestDigest: null, hasManifestDigest: false,
  reasonGiven: null, reasonDigest: null, hasReasonDigest: false, actorKeyId: KEY, actorRole: 'agent', lagMs: 1,
  createdIso: '2026-12-06T00:00:01.000200Z', ...extra,
});
const created = (tools: string[]): RunEvent =>
  event('run.created', { specialistId: 'support', allowedToolCount: tools.length, manifestDigest: manifestDigest(tools), hasManifestDigest: true });
const row = (status: string, events: RunEvent[], extra: Partial<RunRow> = {}): RunRow => ({
  id: 'r1', status, specialist_id: 'support', created_by: KEY, created_iso: '2026-12-06T00:00:00.000000Z',
  manifest: { allowedTools: ['order_lookup.lookup'] }, has_ended: false, ended_at: null, ended_reason_digest: null,
  ended_by_key: null, ended_by_role: null, has_ended_by: false, events, page_rows: 1, row_bytes: 1, ...extra,
});
const ended = { has_ended: true, has_ended_by: true, ended_by_key: KEY, ended_by_role: 'agent', ended_at: '2026-12-06T00:00:01.000100+00:00' };

describe('runMismatch', () => {
  it('a run as the gateway writes it agrees: live with run.created only, ended with one end of its kind', () => {
    expect(runMismatch(row('running', [created(['order_lookup.lookup'])]))).toBeNull();
    expect(runMismatch(row('waiting_approval', [created(['order_lookup.lookup'])]))).toBeNull();
    const end = event('run.completed', { reasonGiven: false, reasonDigest: null, hasReasonDigest: true });
    expect(runMismatch(row('completed', [created(['order_lookup.lookup']), end], ended))).toBeNull();
  });

  it('events the gateway never writes for a run: none, an end first, two creations, two ends', () => {
    expect(runMismatch(row('running', []))?.reason).toMatch(/has no run.created event/);
    expect(runMismatch(row('completed', [event('run.completed')]))?.reason).toMatch(/has no run.created event/);
    const c = created(['order_lookup.lookup']);
    expect(runMismatch(row('running', [c, c]))?.reason).toMatch(/more than one run.created/);
    const end = event('run.cancelled', { hasReasonDigest: true });
    expect(runMismatch(row('cancelled', [c, end, end], ended))?.reason).toMatch(/more than one end event/);
  });

  it('the manifest by its digest, order included; a malformed manifest allows nothing and is held as the empty list', () => {
    const c = created(['a.x', 'b.y']);
    expect(runMismatch(row('running', [c], { manifest: { allowedTools: ['a.x', 'b.y'] } }))).toBeNull();
    expect(runMismatch(row('running', [c], { manifest: { allowedTools: ['b.y', 'a.x'] } }))?.reason).toMatch(/manifest differs.*manifestDigest/);
    expect(runMismatch(row('running', [created([])], { manifest: { allowedTools: 'a.x' } }))).toBeNull();
  });

  it('an end recorded with a reasonDigest must have kept who ended it and when, just before its event', () => {
    const c = created(['order_lookup.lookup']);
    const end = event('run.completed', { reasonGiven: false, hasReasonDigest: true });
    expect(runMismatch(row('completed', [c, end], { ...ended, has_ended_by: false, ended_by_key: null, ended_by_role: null }))?.reason).toMatch(/who ended it differs/);
    expect(runMismatch(row('completed', [c, end], { ...ended, ended_at: null }))?.reason).toMatch(/the time it ended differs/);
    expect(runMismatch(row('completed', [c, end], { ...ended, ended_at: 'yesterday' }))?.reason).toMatch(/the time it ended differs/);
    expect(runMismatch(row('completed', [c, end], { ...ended, ended_at: '2025-12-06T00:00:01.000100+00:00' }))?.reason).toMatch(/the time it ended differs/);
    expect(runMismatch(row('completed', [c, end], { ...ended, ended_at: '2026-12-06T00:00:02+00:00' }))?.reason).toMatch(/the time it ended differs/);
    // Older ends (no reasonDigest): neither was kept on every row, and neither is asked for.
    const older = event('run.completed', { reasonGiven: false });
    expect(runMismatch(row('completed', [c, older], { has_ended: true }))).toBeNull();
  });

  it('a creation time that is not finite is a break, not an error', () => {
    expect(runMismatch(row('running', [{ ...created(['order_lookup.lookup']), lagMs: null }]))?.reason).toMatch(/creation time differs/);
  });

  it('a creation time off its event by more than a statement could take, or before it, is a break', () => {
    expect(runMismatch(row('running', [{ ...created(['order_lookup.lookup']), lagMs: -5 }]))?.reason).toMatch(/creation time differs/);
    expect(runMismatch(row('running', [{ ...created(['order_lookup.lookup']), lagMs: 16 * 60_000 }]))?.reason).toMatch(/creation time differs/);
  });

  it('a status the row constraint would refuse is named only as "ended", not quoted', () => {
    expect(runMismatch(row("'; DROP", [created(['order_lookup.lookup'])]))?.reason).toBe('run r1 is ended, but no end event on the ledger ended it');
  });
});
