/**
 * Tokens of the providers an agent reaches through Nango (HubSpot, Notion, Linear, Atlassian, DigitalOcean, Vault), and
 * webhook URLs whose path is the credential (Discord, Microsoft Teams). Part of token-shapes.ts, which turns each
 * [head, tail] into a pattern; kept apart so that file stays short.
 */

/** [head, tail] of each provider token: the head is a fixed prefix the provider puts on every one. */
export const MORE_VENDOR_TOKEN_SHAPES: readonly (readonly [RegExp, RegExp])[] = [
  // HubSpot private app tokens: pat-<region>-<UUID> (na1, na2, eu1, ap1, …)
  [/pat-(?:na|eu|ap)\d-/, /[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9a-fA-F-])/],
  // Notion integration tokens, ntn_ (46 characters after it) and secret_ of before (43): at least 40, so a
  // secret_santa or secret_key_rotation_policy stays
  [/ntn_/, /[A-Za-z0-9]{40,}(?![A-Za-z0-9_-])/],
  [/secret_/, /[A-Za-z0-9]{40,}(?![A-Za-z0-9_-])/],
  [/lin_(?:api|oauth)_/, /[A-Za-z0-9]{40,}(?![A-Za-z0-9_-])/], // Linear API keys and OAuth tokens: 40 after the head
  // Atlassian API tokens: ATATT, then about 180 base64url characters and "=" with an 8-character checksum
  [/ATATT/, /[A-Za-z0-9_=-]{40,}/],
  [/do[opr]_v1_/, /[0-9a-f]{64}(?![0-9A-Za-z])/], // DigitalOcean personal, OAuth and refresh tokens: 64 hex digits
  [/hv[sbr]\./, /[A-Za-z0-9_-]{24,}/], // HashiCorp Vault service, batch and recovery tokens
];

const SLASH = String.raw`(?:\/|%2[Ff])`;

/**
 * Discord webhook URLs, https://discord.com/api[/v10]/webhooks/{id}/{token} (and discordapp.com): the id and token go,
 * the host stays. The head searched for is "webhooks/"; the host is only looked back at, from there.
 */
const DISCORD_HEAD = String.raw`webhooks${SLASH}`;
const DISCORD_WEBHOOK = new RegExp(
  String.raw`${DISCORD_HEAD}(?<=discord(?:app)?\.com${SLASH}api(?:${SLASH}v\d{1,2})?${SLASH}${DISCORD_HEAD})\d{15,20}${SLASH}[A-Za-z0-9_-]{20,}`,
  'g',
);
/**
 * Microsoft Teams incoming-webhook URLs, https://{tenant}.webhook.office.com/webhookb2/{group}@{tenant}/IncomingWebhook/
 * {id}/{owner}[/…] (outlook.office.com/webhook/… of before): everything from IncomingWebhook/ on goes, the host and
 * the group stay. The head searched for is "IncomingWebhook/"; the host is looked back at across one path segment.
 */
const TEAMS_HEAD = String.raw`IncomingWebhook${SLASH}`;
const TEAMS_WEBHOOK = new RegExp(
  String.raw`${TEAMS_HEAD}(?<=(?:\.webhook\.office\.com${SLASH}webhookb2|outlook\.office(?:365)?\.com${SLASH}webhook)${SLASH}[\w@%.-]{1,200}${SLASH}${TEAMS_HEAD})` +
    String.raw`[0-9A-Fa-f]{32}(?:[\w@.-]|${SLASH})*`,
  'g',
);

export const WEBHOOK_PATH_SECRETS: readonly RegExp[] = [DISCORD_WEBHOOK, TEAMS_WEBHOOK];
export const WEBHOOK_PATH_HEADS: readonly string[] = [DISCORD_HEAD, TEAMS_HEAD];
