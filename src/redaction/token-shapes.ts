/** Credentials with a shape of their own: key blocks, bearer tokens, JWTs, vendor tokens by their fixed prefixes, webhook URLs. */
import { MORE_VENDOR_TOKEN_SHAPES, WEBHOOK_PATH_HEADS, WEBHOOK_PATH_SECRETS } from './provider-token-shapes.js';

/** PEM (RSA, EC, PKCS#8, OpenSSH) and PGP armour ("… PRIVATE KEY BLOCK-----"); an unterminated block goes to the end. */
export const PRIVATE_KEY_BLOCK = /-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)/g;
/**
 * Where a token may start: not inside a run of letters and digits ("_" is a separator: key_sk_live_…), or right after
 * an escape that ends in one: \n, \r, \t or \u0026 of text encoded twice, %3D of a percent-encoded URL.
 * The check is a lookbehind placed after the token's fixed head, not before it: a pattern that opens with its
 * literal head is searched for at native speed, one opening with a lookbehind is tried at every position, many times slower.
 * Each lookbehind reads at most the head and six characters back, so every position is still tried once.
 */
export const AFTER_ESCAPE = String.raw`(?<=\\[nrt]|\\u[0-9A-Fa-f]{4}|%[0-9A-Fa-f]{2})`;
/**
 * Also right after an escape (AFTER_ESCAPE: \\n in text encoded twice, a percent escape as in Authorization:%20Bearer …
 * with the token after a raw blank), where \b sees no word start. The token runs to a blank, a quote, "\\", ",", ";", "<", ">"
 * or "&", as an Authorization value does (redactAuthorizationValues): not only token68 characters, since a Salesforce
 * session id (00D…!AQ…) keeps its secret after the "!". Past an "=" only when at least 8 characters came before it and
 * more token follows: "Bearer realm=…" and "Bearer error=…" of a WWW-Authenticate header are no token, but a token
 * with "=" inside (base64 padding mid-string, key=value tokens) is hidden whole, not cut at its first "=".
 */
export const BEARER = new RegExp(String.raw`(?:\b|${AFTER_ESCAPE})(Bearer)\s+[^\s"'\\,;<>&=]{8,}(?:=+[^\s"'\\,;<>&=]+)*=*`, 'gi');
function token(head: RegExp, tail: RegExp, notAfter = '[A-Za-z0-9]'): RegExp {
  return new RegExp(`${head.source}(?<=(?:(?<!${notAfter})|${AFTER_ESCAPE})${head.source})${tail.source}`, 'g');
}
/** Not after "_" or "-" either: those are base64url characters, and a JWT does not start inside a run of them. */
export const JWT = token(/eyJ/, /[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/, '[A-Za-z0-9_-]');
/** [head, tail] of each vendor token: the head is a fixed prefix the vendor puts on every one. */
const VENDOR_TOKEN_SHAPES: readonly (readonly [RegExp, RegExp])[] = [
  [/shp(?:at|ca|pa|ss|ua|rt)_/, /[A-Za-z0-9]{16,}/], // Shopify access / custom app / private app / shared secret / refresh
  [/Atz[ar]/, /(?:\|[^\s"'<>,;]+|%7[Cc][^\s"'<>,;&]+)/], // Login with Amazon access (Atza|) and refresh (Atzr|) tokens, "|" perhaps as %7C
  [/amzn1\.oa2-cs\.v1\./, /[A-Za-z0-9]{16,}/], // Login with Amazon client secrets
  [/[sr]k_(?:live|test)_/, /[A-Za-z0-9]{10,}/], // Stripe secret and restricted keys
  [/gh[pousr]_/, /[A-Za-z0-9]{20,}/], // GitHub tokens, classic
  [/github_pat_/, /[A-Za-z0-9_]{22,}/], // GitHub fine-grained tokens
  // Slack bot, user, client and configuration tokens (xoxb-, xoxp-, xoxc-, xoxe-1-), rotating refresh tokens (xoxe.xoxp-1-…)
  // and app-level tokens (xapp-1-…)
  [/xox/, /(?:[abcdeprs]|e\.xox[a-z])-[A-Za-z0-9-]{10,}/],
  [/xapp-/, /\d-[A-Za-z0-9-]{10,}/],
  [/A(?:KIA|SIA)/, /[0-9A-Z]{16}\b/], // AWS access key ids, long-term and temporary
  [/AIza/, /[0-9A-Za-z_-]{35}/], // Google API keys
  [/ya29\./, /[A-Za-z0-9_.-]{20,}/], // Google OAuth access tokens
  [/GOCSPX-/, /[A-Za-z0-9_-]{20,}/], // Google OAuth client secrets
  [/sk-(?:proj|ant|svcacct|admin)-/, /[A-Za-z0-9_-]{20,}/], // OpenAI project / service-account / admin keys, Anthropic keys
  // OpenAI user keys of before project keys: "sk-" then exactly 48 letters and digits (a short head, so the whole length is asked)
  [/sk-/, /[A-Za-z0-9]{48}(?![A-Za-z0-9_-])/],
  [/glpat-/, /[A-Za-z0-9_-]{20,}/], // GitLab personal access tokens
  [/SG\./, /[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/], // SendGrid API keys
  [/whsec_/, /[A-Za-z0-9+/=]{20,}/], // Stripe (and Svix) webhook signing secrets
  [/npm_/, /[A-Za-z0-9]{36}\b/], // npm access tokens
  [/hf_/, /[A-Za-z0-9]{34}(?![A-Za-z0-9_-])/], // Hugging Face access tokens: a short head, so the whole length is asked
  [/pypi-/, /AgE[A-Za-z0-9_-]{50,}/], // PyPI API tokens (a macaroon, always "AgE…" once base64-encoded)
  [/tgw_/, /[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/], // this gateway's own API keys (src/auth/api-key-hash.ts): 32 random bytes, base64url
  ...MORE_VENDOR_TOKEN_SHAPES,
];
export const VENDOR_TOKENS = [...VENDOR_TOKEN_SHAPES.map(([head, tail]) => token(head, tail)), ...WEBHOOK_PATH_SECRETS];
/**
 * Every head as one pattern: most strings hold none, and one search for all of them costs a fraction of a replace per
 * shape, which costs even when nothing matches.
 */
export const VENDOR_TOKEN_HEAD = new RegExp([...VENDOR_TOKEN_SHAPES.map(([head]) => head.source), ...WEBHOOK_PATH_HEADS].join('|'));
/**
 * A Telegram bot token, 123456789:AAH…: the bot's id (public), a colon, then 35 characters that start with "A" (34 in
 * the examples of Telegram's own documentation, copied into many configs). The colon and "A" are the head searched
 * for; the id is only looked back at, and stays.
 */
export const TELEGRAM_BOT_TOKEN = /:A(?<=(?<!\d)\d{5,16}:A)[A-Za-z0-9_-]{33,34}(?![A-Za-z0-9_-])/g;
/** A Slack incoming webhook (or workflow trigger) URL: its path is the credential, anyone holding it can post. */
export const SLACK_WEBHOOK = /(hooks\.slack\.com(?:\/|%2[Ff])(?:services|workflows|triggers)(?:\/|%2[Ff]))(?:[A-Za-z0-9_-]|\/|%2[Ff])+/g;
