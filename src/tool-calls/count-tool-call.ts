import type { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import type { MetricsService } from '../metrics/metrics.service.js';

export function countToolCall(catalog: ToolCatalogService, metrics: MetricsService, tool: string, action: string, status: string, errorCode: string | null): void {
  // Label values are bounded: catalog names only (unknown tools collapse to "unknown").
  const known = catalog.find(tool, action);
  metrics.toolCalls.inc({ tool: known ? tool : 'unknown', action: known ? action : 'unknown', status, error_code: errorCode ?? 'none' });
}
