import { Inject, Injectable, Optional } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { VendorTokenStore } from '../credentials/vendor-token.store.js';
import { CredentialsService } from '../credentials/credentials.service.js';
import { Sql } from '../db/sql.js';
import { AmazonHandler } from './amazon/amazon.handler.js';
import { TokenCache } from './auth/token-cache.js';
import { JumioHandler } from './jumio/jumio.handler.js';
import { NangoHandler } from './nango/nango.handler.js';
import { ShopifyHandler } from './shopify/shopify.handler.js';
import { refundLeaseTiming, SqlRefundLeases } from './shopify/shopify.refund-lease.js';
import type { VendorEndpoints, VendorHandler, VendorKey } from './vendor-handler.js';

export function vendorEndpoints(config: AppConfig): VendorEndpoints {
  return {
    shopifyBaseUrl: config.SHOPIFY_BASE_URL,
    shopifyApiVersion: config.SHOPIFY_API_VERSION,
    amazonLwaUrl: config.AMAZON_LWA_URL!,
    amazonSpapiBaseUrl: config.AMAZON_SPAPI_BASE_URL,
    amazonOrdersApi: config.AMAZON_ORDERS_API,
    jumioAuthBaseUrl: config.JUMIO_AUTH_BASE_URL,
    jumioRetrievalBaseUrl: config.JUMIO_RETRIEVAL_BASE_URL,
    nangoHost: config.NANGO_HOST!,
    timeoutMs: config.VENDOR_TIMEOUT_MS,
    connectTimeoutMs: config.VENDOR_CONNECT_TIMEOUT_MS,
    maxResponseBytes: config.VENDOR_MAX_RESPONSE_BYTES,
    userAgent: 'ToolGateway/0.1 (Language=Node.js)',
  };
}

/** Every vendor handler, registered by key. Adding a vendor is one line here plus its folder. */
@Injectable()
export class VendorRegistry {
  private readonly handlers: ReadonlyMap<VendorKey, VendorHandler>;

  constructor(@Inject(APP_CONFIG) config: AppConfig, rotating: VendorTokenStore, sql: Sql, @Optional() credentials?: CredentialsService) {
    const endpoints = vendorEndpoints(config);
    // One token cache for every OAuth vendor, so refreshes are single-flight per credential process-wide.
    const tokens = new TokenCache();
    // Credentials deleted or replaced here: the tokens they bought leave this process's memory at once (another
    // replica's go when they expire, or at its next call with the new ones).
    credentials?.onChange((orgId, type) => tokens.forgetOwner(`${orgId}:${type}`));
    const all: VendorHandler[] = [new ShopifyHandler(endpoints, tokens, rotating, new SqlRefundLeases(sql, refundLeaseTiming(config.VENDOR_TIMEOUT_MS))), new AmazonHandler(endpoints, tokens), new JumioHandler(endpoints, tokens), new NangoHandler(endpoints)];
    this.handlers = new Map(all.map((h) => [h.vendor, h]));
  }

  get(vendor: VendorKey): VendorHandler {
    const h = this.handlers.get(vendor);
    if (!h) throw new Error(`no handler registered for vendor ${vendor}`);
    return h;
  }

  all(): VendorHandler[] {
    return [...this.handlers.values()];
  }
}
