export const TOOL_CALL_STATUSES = [
  'requested',
  'blocked',
  'waiting_approval',
  'approved',
  'running',
  'succeeded',
  'failed',
  'indeterminate',
] as const;
export type ToolCallStatus = (typeof TOOL_CALL_STATUSES)[number];
