import type { ToolCallBody } from './tool-call-body.js';

export interface ToolCallResponse {
  httpStatus: number;
  body: ToolCallBody;
  headers: Record<string, string>;
}

export function respond(body: ToolCallBody, httpStatus: number, replayed: boolean): ToolCallResponse {
  return { httpStatus, body, headers: replayed ? { 'Idempotent-Replayed': 'true' } : {} };
}
