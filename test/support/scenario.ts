import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { JUMIO_EMULATOR_CREDENTIALS } from '../../src/emulator/jumio.emulator.js';
import { NANGO_EMULATOR_CREDENTIALS } from '../../src/emulator/nango.emulator.js';
import {
  AMAZON_CLIENT_ID, AMAZON_CLIENT_SECRET, AMAZON_REFRESH_TOKEN, JUMIO_CLIENT_ID, JUMIO_CLIENT_SECRET, NANGO_SECRET_KEY, SHOPIFY_TOKEN,
} from './secrets.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from './test-app.js';

export type Vendor = 'shopify' | 'amazon' | 'jumio' | 'nango';

/**
 * Each scenario org connects its own shop (the emulator serves every shop alike): the one-refund-per-order lease
 * is per shop, so orgs sharing one would hold each other's refunds up across tests.
 */
export const shopDomainOf = (orgId: string): string => `org-${orgId.replace(/-/g, '')}.myshopify.com`;

export const CREDENTIALS: Record<Vendor, Record<string, unknown>> = {
  shopify: { shopDomain: 'acme-emulator.myshopify.com', accessToken: SHOPIFY_TOKEN },
  amazon: { clientId: AMAZON_CLIENT_ID, clientSecret: AMAZON_CLIENT_SECRET, refreshToken: AMAZON_REFRESH_TOKEN, region: 'na' },
  jumio: { clientId: JUMIO_CLIENT_ID, clientSecret: JUMIO_CLIENT_SECRET, region: 'amer-1', accountId: JUMIO_EMULATOR_CREDENTIALS.accountId },
  nango: { secretKey: NANGO_SECRET_KEY, connectionId: NANGO_EMULATOR_CREDENTIALS.connectionId, providerConfigKey: NANGO_EMULATOR_CREDENTIALS.providerConfigKey },
};

/** Vendor base URLs pointing at the emulator (server config, as in production). */
export function emulatorEnv(url: string): Record<string, string> {
  return {
    SHOPIFY_BASE_URL: url,
    AMAZON_LWA_URL: `${url}/auth/o2/token`,
    AMAZON_SPAPI_BASE_URL: url,
    JUMIO_AUTH_BASE_URL: url,
    JUMIO_RETRIEVAL_BASE_URL: url,
    NANGO_HOST: url,
  };
}

export interface Harness {
  t: TestApp;
  emu: VendorEmulator;
  close(): Promise<void>;
}

/** The gateway plus a vendor emulator on 127.0.0.1, wired together by config. */
export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const emu = createFullEmulator();
  await emu.start();
  const t = await startTestApp({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500', ...env });
  const h: Harness = {
    t,
    emu,
    async close() {
      // The app the harness holds now: a spec that restarts the gateway (h.t = await startTestApp(…)) replaces it, and
      // closing the first one (again) left the replacement running — its sweeps and sealer on the shared database for
      // the rest of the run, taking other specs' approved calls and the sealer's lock.
      await h.t.close();
      await emu.stop();
    },
  };
  return h;
}

export interface OrgSetup {
  orgId: string;
  agentKey: string;
  adminKey: string;
  runId: string;
}

/** An org ready for tool calls: flag, permissions, credentials, an agent key and a run. */
export async function setupOrg(
  t: TestApp,
  opts: { tools: string[]; flag?: boolean; vendors?: Vendor[]; rules?: unknown[]; specialistId?: string } = { tools: ['order_lookup.lookup'] },
): Promise<OrgSetup> {
  const orgId = await createOrg(t, 'Scenario Org');
  const admin = await createKey(t, orgId, 'admin');
  const agent = await createKey(t, orgId, 'agent');
  const ok = (res: { status: number; body: unknown }, what: string) => {
    if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  if (opts.flag !== false) {
    ok(await t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true }), 'flag');
  }
  const items = opts.tools.map((k) => {
    const [toolName, action] = k.split('.');
    return { toolName, action, specialistId: null, enabled: true };
  });
  ok(await t.http.put(`/v1/orgs/${orgId}/tool-permissions`).set(adminAuth).send({ items }), 'permissions');
  for (const v of opts.vendors ?? ['shopify']) {
    const config = v === 'shopify' ? { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(orgId) } : CREDENTIALS[v];
    ok(await t.http.put(`/v1/orgs/${orgId}/integrations/${v}/credentials`).set(adminAuth).send({ config }), `credentials ${v}`);
  }
  if (opts.rules) ok(await t.http.put(`/v1/orgs/${orgId}/policies`).set(adminAuth).send({ rules: opts.rules }), 'policies');
  const run = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: opts.specialistId ?? 'support' });
  ok(run, 'run');
  return { orgId, agentKey: agent.key, adminKey: admin.key, runId: (run.body as { id: string }).id };
}

let seq = 0;
export function toolUse(name: string, input: Record<string, unknown>, id = `toolu_${Date.now()}_${++seq}`) {
  return { type: 'tool_use', id, name, input };
}

/** GET /v1/ledger/verify for an org, as the platform admin: whether its chain and rows hold, and where not. */
export async function verifyLedger(t: TestApp, orgId: string): Promise<{ ok: boolean; brokenAt?: { reason: string } }> {
  return (await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as { ok: boolean; brokenAt?: { reason: string } };
}
