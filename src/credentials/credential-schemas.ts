import { AMAZON_MARKETPLACES, isAmazonMarketplaceOf, type AmazonRegion } from '../vendors/amazon/amazon.credentials.js';
import { UUID_PATTERN } from '../vendors/jumio/jumio.tools.js';
import type { IntegrationType } from './integration-credential.entity.js';

/** Some character other than whitespace: the Amazon and Jumio handlers' nonEmpty. */
const NOT_BLANK = '\\S';

/**
 * NOT_BLANK without ':': an HTTP Basic user-id may hold none (RFC 7617 §2), and the Jumio token request sends the
 * client id as one (parseJumioCredentials refuses the same). Blanks then one other character, so the match is linear.
 */
const NOT_BLANK_NO_COLON = '^\\s*[^:\\s][^:]*$';

/**
 * A Nango id: the characters Nango itself accepts (its server's connectionId and providerConfigKey rules), at most
 * 255 of them (Nango's cap). Blanks only inside: the id is sent as a header, which the Nango handler refuses with a
 * leading or trailing blank (its HEADER_VALUE), so the PUT refuses what no call could use. `nonBlank`: the set
 * without the blank, as a character class body. One blank run per non-blank character keeps the match linear.
 */
const nangoId = (nonBlank: string): Record<string, unknown> => ({ type: 'string', minLength: 1, maxLength: 255, pattern: `^[${nonBlank}](?: *[${nonBlank}])*$` });

/** The config each integration type accepts (API.md §7). Unknown fields are refused. */
export const CREDENTIAL_SCHEMAS: Record<IntegrationType, Record<string, unknown>> = {
  // An Admin API token, or an app's client id and secret (the gateway buys its tokens): exactly one of
  // the two, checked by credentialsProblem. With a refresh token, the client id and secret are a public
  // app's and the gateway refreshes its expiring offline tokens.
  shopify: {
    type: 'object',
    additionalProperties: false,
    required: ['shopDomain'],
    properties: {
      shopDomain: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,60}\\.myshopify\\.com$' },
      // Printable ASCII without blanks, as they go into a header or a JSON body (the handler checks the same).
      accessToken: { type: 'string', minLength: 8, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' },
      clientId: { type: 'string', minLength: 1, maxLength: 256, pattern: '^[\\x21-\\x7e]+$' },
      clientSecret: { type: 'string', minLength: 8, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' },
      refreshToken: { type: 'string', minLength: 8, maxLength: 2048, pattern: '^[\\x21-\\x7e]+$' },
      apiVersion: { type: 'string', pattern: '^(\\d{4}-(01|04|07|10)|unstable)$' },
    },
  },
  amazon: {
    type: 'object',
    additionalProperties: false,
    required: ['clientId', 'clientSecret', 'refreshToken', 'region'],
    properties: {
      // Not blank: the handler refuses a value that is only whitespace (JS \s is what String#trim removes).
      clientId: { type: 'string', minLength: 1, maxLength: 256, pattern: NOT_BLANK },
      clientSecret: { type: 'string', minLength: 1, maxLength: 512, pattern: NOT_BLANK },
      refreshToken: { type: 'string', minLength: 1, maxLength: 2048, pattern: NOT_BLANK },
      region: { enum: ['na', 'eu', 'fe'] },
      // One of the region's marketplaces (credentialsProblem). No call reads it: getOrder is by order id.
      marketplaceId: { type: 'string', pattern: '^[A-Z0-9]{1,32}$' },
    },
  },
  // accountId is the default account: Jumio KYX keeps one account per end user, and kyc.get_status names the
  // execution's own account in its accountId param; a call that names none is asked under this one. Required, so every
  // call has an account: a call refused for having none could only tell the model "check the input" (it is recorded
  // after its params were judged valid), never which param to give.
  jumio: {
    type: 'object',
    additionalProperties: false,
    required: ['clientId', 'clientSecret', 'region', 'accountId'],
    properties: {
      clientId: { type: 'string', minLength: 1, maxLength: 256, pattern: NOT_BLANK_NO_COLON },
      clientSecret: { type: 'string', minLength: 1, maxLength: 512, pattern: NOT_BLANK },
      region: { enum: ['amer-1', 'emea-1', 'apac-1'] },
      // A UUID, as the call's own accountId param; either case, stored in lower case (canonicalCredentials).
      accountId: { type: 'string', pattern: UUID_PATTERN },
    },
  },
  nango: {
    type: 'object',
    additionalProperties: false,
    required: ['secretKey', 'connectionId', 'providerConfigKey'],
    properties: {
      // Sent as a header: printable ASCII, inner blanks only (the handler checks the same).
      secretKey: { type: 'string', minLength: 8, maxLength: 256, pattern: '^[\\x21-\\x7e](?:[\\x20-\\x7e]{0,254}[\\x21-\\x7e])?$' },
      connectionId: nangoId(String.raw`A-Za-z0-9,.;:=+~\[\]|@$\{\}"'\\/_-`),
      providerConfigKey: nangoId(String.raw`A-Za-z0-9~:.@_-`),
    },
  },
};

/** What the schemas cannot say (strict Ajv refuses `required` of undeclared names in oneOf branches): one message, or null. */
export function credentialsProblem(type: IntegrationType, config: Record<string, unknown>): string | null {
  if (type === 'amazon') {
    const region = config.region as AmazonRegion;
    if (config.marketplaceId === undefined || isAmazonMarketplaceOf(region, config.marketplaceId)) return null;
    // Names the region's marketplaces, never the value sent.
    return `config.marketplaceId: must be a marketplace of region ${region} (${AMAZON_MARKETPLACES[region].join(', ')})`;
  }
  if (type !== 'shopify') return null;
  const token = config.accessToken !== undefined;
  const client = config.clientId !== undefined || config.clientSecret !== undefined || config.refreshToken !== undefined;
  if (token === client || (client && (config.clientId === undefined || config.clientSecret === undefined))) {
    return 'config: give accessToken, or clientId and clientSecret (with refreshToken for a public app\'s expiring offline token)';
  }
  // Shopify's own prefixes say what a value is: an app's secret (shpss_) or a refresh token (shprt_) is never an Admin
  // API token, and pasted as one it failed only at the first call. Named by its kind, never by its value.
  if (typeof config.accessToken === 'string' && /^shpss_/.test(config.accessToken)) {
    return "config.accessToken: this is an app's client secret (shpss_…), not an Admin API access token: send it as clientSecret, with clientId";
  }
  if (typeof config.accessToken === 'string' && /^shprt_/.test(config.accessToken)) {
    return 'config.accessToken: this is a refresh token (shprt_…), not an Admin API access token: send it as refreshToken, with clientId and clientSecret';
  }
  return null;
}

/**
 * The config as stored, of one that passed the checks above: a Jumio accountId in lower case, as a call's accountId
 * param is (JumioHandler.canonicalParams), so two spellings of one account are one config with one fingerprint.
 */
export function canonicalCredentials(type: IntegrationType, config: Record<string, unknown>): Record<string, unknown> {
  if (type === 'jumio' && typeof config.accountId === 'string') return { ...config, accountId: config.accountId.toLowerCase() };
  return config;
}
