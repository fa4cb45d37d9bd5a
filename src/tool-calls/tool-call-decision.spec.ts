import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import { actionsInRun, decide, type DecisionInput } from './tool-call-decision.js';

const entry = (tool: string, action: string): CatalogEntry =>
  ({ key: `${tool}.${action}`, vendor: 'shopify', tool: { name: tool }, action: { name: action, riskLevel: 'low' }, handler: { vendor: 'shopify', tools: [] } }) as unknown as CatalogEntry;
const CATALOG = new Map(['order_lookup.lookup', 'shopify_refund.create', 'shopify_refund.preview'].map((k) => [k, entry(...(k.split('.') as [string, string]))]));

const input = (over: Partial<DecisionInput>): DecisionInput => ({
  flagEnabled: true,
  toolName: 'shopify_refund',
  action: 'create',
  params: {},
  allowedTools: new Set(['shopify_refund.create', 'shopify_refund.preview', 'order_lookup.lookup']),
  find: (t, a) => CATALOG.get(`${t}.${a}`),
  checkParams: () => ({ ok: true }),
  rules: [],
  ...over,
});

describe('decide: flag, manifest, params, policy', () => {
  it('the flag comes first, whatever the input', () => {
    expect(decide(input({ flagEnabled: false, action: undefined }))).toEqual({ status: 'blocked', errorCode: 'FEATURE_DISABLED' });
  });

  it('a tool of the run with no string action is invalid input naming the permitted actions', () => {
    expect(decide(input({ action: undefined }))).toEqual({
      status: 'failed', errorCode: 'INVALID_INPUT', errorText: 'action: is required (one of: create, preview)',
    });
    for (const action of [null, 3, ['create'], { name: 'create' }]) {
      expect(decide(input({ action }))).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT', errorText: 'action: must be one of: create, preview' });
    }
  });

  it('an action the run does not allow is NOT_IN_MANIFEST, naming what it allows, never the model text', () => {
    const d = decide(input({ action: 'create', allowedTools: new Set(['shopify_refund.preview']) }));
    expect(d).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST', errorText: 'this run allows only these actions of this tool: preview' });
    const typo = decide(input({ action: 'sk_live_secret' }));
    expect(typo).toMatchObject({ errorCode: 'NOT_IN_MANIFEST', errorText: 'this run allows only these actions of this tool: create, preview' });
    expect(JSON.stringify(typo)).not.toContain('sk_live');
  });

  it('a tool not in the run is NOT_IN_MANIFEST even without an action', () => {
    for (const action of [undefined, 'lookup', 5]) {
      expect(decide(input({ toolName: 'jumio_verify', action }))).toEqual({
        status: 'blocked', errorCode: 'NOT_IN_MANIFEST', errorText: "this tool is not in this run; a run's tools are fixed when it starts, so a tool permitted since needs a new run", entry: undefined,
      });
    }
  });

  it("the run's own manifest key sent as the name is INVALID_INPUT saying how to send it (not 'not in this run')", () => {
    const d = decide(input({ toolName: 'shopify_refund.create', action: undefined }));
    expect(d).toEqual({ status: 'failed', errorCode: 'INVALID_INPUT', errorText: 'name: "shopify_refund.create" is a tool and its action: send name "shopify_refund" with input.action "create"' });
    // A dotted name the run does not have says nothing of it.
    expect(decide(input({ toolName: 'shopify_refund.void', action: undefined }))).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
  });

  it('params are checked only for an allowed action; policy only for valid params', () => {
    const bad = decide(input({ checkParams: () => ({ ok: false, message: 'amount: is required' }), rules: null }));
    expect(bad).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT', errorText: 'amount: is required' });
    expect(decide(input({ rules: null }))).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED', policy: { decision: 'block' } });
    expect(decide(input({}))).toMatchObject({ status: 'running', policy: { decision: 'allow' } });
  });

  it('actionsInRun lists only catalog actions of that tool (a manifest key outside the catalog or of a prefix-sharing tool is not one)', () => {
    const allowed = new Set(['shopify_refund.create', 'shopify_refund.gone', 'shopify_refund_x.create', 'order_lookup.lookup']);
    expect(actionsInRun('shopify_refund', allowed, (t, a) => CATALOG.get(`${t}.${a}`))).toEqual(['create']);
  });
});
