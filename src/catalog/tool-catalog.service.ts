import { Injectable } from '@nestjs/common';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { ToolActionSpec, ToolSpec, VendorHandler, VendorKey } from '../vendors/vendor-handler.js';
import { VendorRegistry } from '../vendors/vendor-registry.js';

export interface CatalogEntry {
  tool: ToolSpec;
  action: ToolActionSpec;
  vendor: VendorKey;
  handler: VendorHandler;
  /** "tool.action" */
  key: string;
}

export type ParamCheck = { ok: true } | { ok: false; message: string };

function describeAjvError(e: ErrorObject): string {
  const at = e.instancePath ? e.instancePath.slice(1).replace(/\//g, '.') : '';
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    return `${at ? `${at}.` : ''}${missing}: is required`;
  }
  if (e.keyword === 'additionalProperties') {
    const extra = (e.params as { additionalProperty: string }).additionalProperty;
    return `${at ? `${at}.` : ''}${extra}: is not an allowed parameter`;
  }
  return `${at || 'params'}: ${e.message ?? 'is invalid'}`;
}

/**
 * The catalog: every tool and action the vendors declare, with compiled JSON
 * Schema validators (ajv, strict, compiled once at start-up).
 */
@Injectable()
export class ToolCatalogService {
  private readonly entries = new Map<string, CatalogEntry>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly tools: ToolSpec[] = [];

  constructor(registry: VendorRegistry) {
    const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
    for (const handler of registry.all()) {
      for (const tool of handler.tools) {
        this.tools.push(tool);
        for (const action of tool.actions) {
          const key = `${tool.name}.${action.name}`;
          if (this.entries.has(key)) throw new Error(`duplicate catalog entry ${key}`);
          this.entries.set(key, { tool, action, vendor: handler.vendor, handler, key });
          this.validators.set(key, ajv.compile(action.inputSchema));
        }
      }
    }
  }

  list(): ToolSpec[] {
    return this.tools;
  }

  find(toolName: string, action: string): CatalogEntry | undefined {
    return this.entries.get(`${toolName}.${action}`);
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** JSON Schema first, then the vendor's own pre-flight checks (e.g. Nango path safety). */
  checkParams(entry: CatalogEntry, params: Record<string, unknown>): ParamCheck {
    const validate = this.validators.get(entry.key)!;
    if (!validate(params)) return { ok: false, message: describeAjvError(validate.errors![0]) };
    const extra = entry.handler.validate?.(entry.tool.name, entry.action.name, params) ?? null;
    return extra ? { ok: false, message: extra } : { ok: true };
  }
}
