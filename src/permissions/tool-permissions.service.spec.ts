import { describe, expect, it } from 'vitest';
import { diffPermissions, type PermissionView } from './tool-permissions.service.js';

const row = (toolName: string, action: string, specialistId: string | null, enabled: boolean): PermissionView => ({ toolName, action, specialistId, enabled });

describe('diffPermissions (the tool_permissions.changed event’s added/removed/changed)', () => {
  it('keys rows by toolName, action and specialistId: the org-wide row and a specialist’s row of one action are apart', () => {
    const before = [row('kyc', 'get_status', null, true), row('kyc', 'get_status', 'kyc-bot', false), row('order_lookup', 'lookup', null, true)];
    const after = [row('kyc', 'get_status', 'kyc-bot', true), row('order_lookup', 'lookup', null, true), row('shopify_refund', 'create', 'refund-bot', true)];
    expect(diffPermissions(before, after)).toEqual({
      added: [row('shopify_refund', 'create', 'refund-bot', true)],
      removed: [row('kyc', 'get_status', null, true)],
      changed: [{ toolName: 'kyc', action: 'get_status', specialistId: 'kyc-bot', from: false, to: true }],
    });
  });

  it('the same set, or two empty ones, change nothing', () => {
    const set = [row('kyc', 'get_status', null, false), row('kyc', 'get_status', 'kyc-bot', true)];
    expect(diffPermissions(set, [...set])).toEqual({ added: [], removed: [], changed: [] });
    expect(diffPermissions([], [])).toEqual({ added: [], removed: [], changed: [] });
  });
});
