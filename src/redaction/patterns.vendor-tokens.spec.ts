import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

/** Credentials of common providers that text redaction knew neither by shape nor by the header name written before them. */
describe('redactSecretsInText: tokens of Slack, Google, Azure and other common providers', () => {
  it.each([
    ['a Slack refresh token', 'rotated to xoxe-1-My0xLTEyMzQ1Njc4OTAtMTIzNDU2Nzg5MDEyMy1hYmNkZWY', `rotated to ${REDACTED}`],
    ['a Slack rotating user token', 'xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAtMTIzNDU2', REDACTED],
    ['a Slack client token', 'd=xoxc-1234567890-1234567890123-abcdef', `d=${REDACTED}`],
    ['a Slack bot token, as before', 'xoxb-1234567890-1234567890123-AbCdEfGhIjKl', REDACTED],
    ['a Slack app-level token', 'socket mode xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef', `socket mode ${REDACTED}`],
    [
      'a Slack incoming-webhook URL, keeping the host',
      'post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX now',
      `post to https://hooks.slack.com/services/${REDACTED} now`,
    ],
    ['a Slack workflow webhook URL', 'https://hooks.slack.com/workflows/T01/A02/123/AbCd', `https://hooks.slack.com/workflows/${REDACTED}`],
    ['a percent-encoded Slack webhook URL', 'url=https%3A%2F%2Fhooks.slack.com%2Fservices%2FT0%2FB0%2FXXXX&x=1', `url=https%3A%2F%2Fhooks.slack.com%2Fservices%2F${REDACTED}&x=1`],
    ['a Google OAuth access token', 'use ya29.a0AfH6SMBx3kLqabcdefghijklmnopqrstuvwxyz0123456789 here', `use ${REDACTED} here`],
    ['a Google OAuth client secret', 'client secret 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', `client secret ${REDACTED}`],
    ['a legacy OpenAI key', `key sk-${'Ab1'.repeat(16)}.`, `key ${REDACTED}.`],
    ['a Hugging Face token', `HF hf_${'aBcDeFgHiJ'.repeat(3)}abcd`, `HF ${REDACTED}`],
    ['a PyPI token', `pypi-AgEIcHlwaS5vcmc${'A'.repeat(60)}`, REDACTED],
    [
      'a Telegram bot token, keeping the bot id',
      'https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage',
      `https://api.telegram.org/bot123456789:${REDACTED}/sendMessage`,
    ],
  ])('redacts %s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['an Azure Storage connection string', 'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abcdEFGH1234abcd==;EndpointSuffix=core.windows.net', `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${REDACTED};EndpointSuffix=core.windows.net`],
    ['a Cloudflare X-Auth-Key header', 'curl -H "X-Auth-Key: c2547eb745079dac9320b638f5e225cf483cc5cf" https://x', `curl -H "X-Auth-Key: ${REDACTED}" https://x`],
    ['a Datadog application key header', 'DD-APPLICATION-KEY: 0123456789abcdef\nAccept: */*', `DD-APPLICATION-KEY: ${REDACTED}\nAccept: */*`],
    ['a Datadog application key parameter', '?application_key=0123456789abcdef&from=1', `?application_key=${REDACTED}&from=1`],
    ['an Azure API Management subscription key', 'Ocp-Apim-Subscription-Key: 0123456789abcdef', `Ocp-Apim-Subscription-Key: ${REDACTED}`],
  ])('redacts the value of %s, named like a secret', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['a hug', 'xoxo-hugs-and-kisses-to-all'],
    ['a Slack-like word with no digit after xapp-', 'xapp-store-listing-page'],
    ['a short sk- SKU', 'sk-1234-blue'],
    ['a sk- run of the wrong length', `sk-${'a'.repeat(47)}`],
    ['hf_ inside a word', `chf_${'a'.repeat(34)}`],
    ['a time', 'at 12:30:45'],
    ['a colon before A that is no bot token', '123456789:Abc'],
    ['Slack hooks with no path', 'see https://hooks.slack.com/ for details'],
    ['ya29 with no token', 'ya29.x'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });
});

describe('redactSecretsInText: a secret parameter inside a percent-encoded URL', () => {
  it.each([
    ['api_key in a "next" URL', 'https://login.example.com/?next=https%3A%2F%2Fapi.example.com%2Fv1%3Fapi_key%3Dsupersecret123', `https://login.example.com/?next=https%3A%2F%2Fapi.example.com%2Fv1%3Fapi_key%3D${REDACTED}`],
    ['a password, up to the next encoded "&"', 'redirect_uri=https%3A%2F%2Fx.com%2Fcb%3Fpassword%3Dhunter2xyz%26u%3D1', `redirect_uri=https%3A%2F%2Fx.com%2Fcb%3Fpassword%3D${REDACTED}%26u%3D1`],
    ['lower-case escapes', 'n=%2fcb%3faccess_token%3dabc%2fdef%26page%3d2', `n=%2fcb%3faccess_token%3d${REDACTED}%26page%3d2`],
    ['the second parameter', 'n=%2Fcb%3Fpage%3D2%26client_secret%3Ds3cr3t%23frag', `n=%2Fcb%3Fpage%3D2%26client_secret%3D${REDACTED}%23frag`],
    ['encoded twice', 'n=https%253A%252F%252Fx%252Fcb%253Ftoken%253Dabc123%2526a%253D1', `n=https%253A%252F%252Fx%252Fcb%253Ftoken%253D${REDACTED}%2526a%253D1`],
    ['an encoded bracketed name', 'n=%3Fauth%5Btoken%5D%3Dabc', `n=%3Fauth%5Btoken%5D%3D${REDACTED}`],
  ])('redacts %s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['ordinary encoded parameters', 'next=https%3A%2F%2Fshop.example%2Forders%3Fpage%3D2%26status%3Dopen'],
    ['an encoded "=" with no name before it', 'x%3D1'],
    ['a name that only contains a secret word inside a longer one', 'n=%3Fbypass_cache%3D1'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });
});

describe('new credential patterns stay linear', () => {
  /** CPU time, not wall time: the other work on a loaded machine does not count, a blow-up here does. */
  function cpuMillis(fn: () => void): number {
    const before = process.cpuUsage();
    fn();
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1_000;
  }

  it.each([
    ['encoded delimiters before names with no "="', (n: number) => '%3Fapi_key%26'.repeat(n / 13) + '%3D'],
    ['one endless encoded name', (n: number) => `%3F${'a'.repeat(n)}`],
    ['encoded names with empty values', (n: number) => '%3Ftoken%3D'.repeat(n / 11)],
    ['an endless encoded value', (n: number) => `%3Ftoken%3D${'%41'.repeat(n / 3)}`],
    ['colons before A', (n: number) => '1234567:A'.repeat(n / 9)],
    ['digits then ":A" then a short tail', (n: number) => `${'1'.repeat(n)}:AAbc`],
    ['Slack hook hosts', (n: number) => 'hooks.slack.com/services/'.repeat(n / 25)],
    ['token heads with short tails', (n: number) => 'xoxe.xoxp-1 xapp-1- ya29. GOCSPX- hf_a sk-a '.repeat(n / 44)],
  ])('%s: 100 KB redact about as fast as harmless text, and what follows is still redacted', (_what, make) => {
    const text = `${make(100_000)} ?access_token=TAILSECRET`;
    // Harmless prose of the same size, timed now: a slower machine slows both alike, while a quadratic blow-up on
    // 100 KB costs seconds where the prose costs milliseconds.
    const prose = 'the parcel left the depot on time '.repeat(Math.ceil(text.length / 34)).slice(0, text.length);
    secrets(prose.slice(0, 10_000)); // warm up
    secrets(text.slice(0, 10_000));
    const baseline = cpuMillis(() => secrets(prose));
    let out = '';
    const took = cpuMillis(() => {
      out = secrets(text);
    });
    expect(out).not.toContain('TAILSECRET');
    expect(took, `hostile ${Math.round(took)} ms, prose of the same size ${Math.round(baseline)} ms`).toBeLessThan(20 * baseline + 500);
  });
});
