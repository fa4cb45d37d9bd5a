import { describe, expect, it } from 'vitest';
import { vendorEndpoints } from '../vendors/vendor-registry.js';
import { loadConfig } from './app-config.js';
import { ConfigError } from './config.schema.js';

const KEY = Buffer.alloc(32, 1).toString('base64');
const load = (env: Record<string, string>) => loadConfig({ NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: KEY, ...env });

describe('AMAZON_ORDERS_API', () => {
  it('defaults to v0 (unset or empty) and takes 2026-01-01; the vendor endpoints carry it to the Amazon handler', () => {
    expect(load({}).AMAZON_ORDERS_API).toBe('v0');
    expect(load({ AMAZON_ORDERS_API: '' }).AMAZON_ORDERS_API).toBe('v0');
    const cfg = load({ AMAZON_ORDERS_API: '2026-01-01' });
    expect(cfg.AMAZON_ORDERS_API).toBe('2026-01-01');
    expect(vendorEndpoints(cfg).amazonOrdersApi).toBe('2026-01-01');
    expect(vendorEndpoints(load({})).amazonOrdersApi).toBe('v0');
  });

  it('refuses anything else, naming the variable and the accepted values', () => {
    // the spaces around a value are not part of it
    expect(vendorEndpoints(load({ AMAZON_ORDERS_API: ' 2026-01-01 ' })).amazonOrdersApi).toBe('2026-01-01');
    for (const bad of ['v1', '2026-01-02', 'latest']) {
      let err: unknown;
      try {
        load({ AMAZON_ORDERS_API: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems, bad).toEqual([`AMAZON_ORDERS_API must be one of v0, 2026-01-01, got "${bad}"`]);
    }
  });
});
