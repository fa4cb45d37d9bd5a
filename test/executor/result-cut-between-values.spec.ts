import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderForModel, truncationNote } from '../../src/executor/result-budget.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, setupNangoOrg } from './support.js';

/**
 * A result over the budget was cut at a byte, wherever it fell: inside a JSON number ("amount":123456 shown as
 * "amount":12) right before the truncation note, so the model read a well-formed, smaller amount (12 cents for
 * 1,234.56 USD in a Stripe-like refund list through nango_proxy.get; a money reviewer's finding). It is now cut
 * between values (jsonPrefix).
 */
const BUDGET = 512;
const NUMBERISH = /[0-9.eE+-]/;

/** The JSON the model was shown (content before the note). */
const shownPart = (content: string) => content.slice(0, content.indexOf('\n[truncated'));

/** Whether the shown prefix ends inside a number literal of the full JSON. */
function cutInsideNumber(full: string, shown: string): boolean {
  const next = full[shown.length];
  const last = shown.at(-1) ?? '';
  return NUMBERISH.test(last) && next !== undefined && NUMBERISH.test(next);
}

const refunds = (lead: number) => ({ lead: 'p'.repeat(lead), data: [{ id: 're_1', object: 'refund', amount: 123456, currency: 'usd' }], tail: 't'.repeat(1000) });

describe('a truncated result never shows a cut amount as if it were whole', () => {
  it('pure: renderForModel never shows "amount":12 of "amount":123456', () => {
    const json = JSON.stringify(refunds(300));
    const full = Buffer.byteLength(json);
    const note = Buffer.byteLength(truncationNote(full, full, 'abc'));
    const budget = json.indexOf('123456') + 2 + note; // the cut after "12"
    const r = renderForModel(json, budget, 'abc');
    const shown = shownPart(r.content);
    expect(r.truncated).toBe(true);
    expect(cutInsideNumber(json, shown), `the model reads ${JSON.stringify(shown.slice(-12))} of ${JSON.stringify(json.slice(shown.length - 12, shown.length + 4))}`).toBe(false);
  });

  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness({ RESULT_BUDGET_BYTES: String(BUDGET) });
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  const answerWith = (body: object) => h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, body });
  const full = async (id: string) => JSON.stringify((await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(org.agentKey))).body.result);

  it('pipeline: nango_proxy.get of a Stripe-like refund list shows the model an amount whole or not at all', async () => {
    // A probe places the cut: where the budget ends in the result's JSON.
    answerWith(refunds(300));
    const probe = await call(h, org, 'nango_proxy', { action: 'get', path: '/v1/refunds' });
    expect(probe.body).toMatchObject({ status: 'succeeded', truncated: true });
    const probeJson = await full(probe.body.toolCallId);
    const shownBytes = Buffer.byteLength(shownPart(probe.body.toolResult.content as string));
    const lead = 300 + shownBytes - (probeJson.indexOf('123456') + 2);
    answerWith(refunds(lead));
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: '/v1/refunds' });
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: true });
    const shown = shownPart(res.body.toolResult.content as string);
    const json = await full(res.body.toolCallId);
    expect(json.startsWith(shown)).toBe(true);
    expect(cutInsideNumber(json, shown), `the model reads ${JSON.stringify(shown.slice(-12))} of ${JSON.stringify(json.slice(shown.length - 12, shown.length + 4))}`).toBe(false);
  });
});
