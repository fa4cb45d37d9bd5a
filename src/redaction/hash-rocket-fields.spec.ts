/**
 * name => value: Ruby's Hash#inspect, PHP's print_r and var_export, Perl's Data::Dumper, Elixir maps. An upstream
 * echoing its params in an error (a Rails app behind the Nango proxy) writes them so; a secret name there loses its
 * value as it does before ":" or "=".
 */
import { describe, expect, it } from 'vitest';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });
const TOKEN = 'b2f4c6d8-1a3e-4f5b-9c7d-0e2f4a6b8c0d';

describe('redactSecretsInText: name => value', () => {
  it.each([
    ['Ruby Hash#inspect', `Invalid request: {"access_token"=>"${TOKEN}", "scope"=>"read_orders"}`, `Invalid request: {"access_token"=>"${REDACTED}", "scope"=>"read_orders"}`],
    ['Ruby 3.4 inspect, blanks around', `{"client_secret" => "${TOKEN}"}`, `{"client_secret" => "${REDACTED}"}`],
    ['a Ruby symbol key', `{:password=>"${TOKEN}"}`, `{:password=>"${REDACTED}"}`],
    ['PHP print_r', `Array\n(\n    [api_key] => ${TOKEN}\n    [user] => bob\n)`, `Array\n(\n    [api_key] => ${REDACTED}\n    [user] => bob\n)`],
    ['PHP var_export', `array (\n  'client_secret' => '${TOKEN}',\n)`, `array (\n  'client_secret' => '${REDACTED}',\n)`],
    ['Perl Data::Dumper', `$VAR1 = { 'password' => '${TOKEN}' };`, `$VAR1 = { 'password' => '${REDACTED}' };`],
    ['a Perl bareword key', `{ api_key => '${TOKEN}' }`, `{ api_key => '${REDACTED}' }`],
    ['Elixir map', `%{"refresh_token" => "${TOKEN}", "expires_in" => 3600}`, `%{"refresh_token" => "${REDACTED}", "expires_in" => 3600}`],
    ['Ruby inspect inside a JSON string', `{\\"access_token\\"=>\\"${TOKEN}\\"}`, `{\\"access_token\\"=>\\"${REDACTED}\\"}`],
    ['an Authorization value keeps its scheme', `{"Authorization"=>"SSWS ${TOKEN}"}`, `{"Authorization"=>"SSWS ${REDACTED}"}`],
    ['an Authorization list goes whole', `{"Authorization"=>["Bearer ${TOKEN}"]}`, `{"Authorization"=>${REDACTED}}`],
    ['a Cookie to its closing quote', `{"Cookie"=>"sid=${TOKEN}; theme=dark"}`, `{"Cookie"=>"${REDACTED}"}`],
  ])('%s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
    expect(secrets(expected)).toBe(expected);
  });

  it.each([
    ['names that are no secret', '{"scope"=>"read_orders", "id"=>42, :status=>"ok"}'],
    ['null, true and false', 'array (\'password\' => null, \'token\' => true, \'secret\' => false)'],
    ['an empty print_r value does not take the next line', 'Array\n(\n    [api_key] => \n    [user] => bob\n)'],
    ['comparison and arrow operators', 'a <=> b; x ==> y; (token) => token.trim()'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });

  it('input and output records lose the secret of each form', () => {
    for (const text of [
      `Invalid request: {"access_token"=>"${TOKEN}", "scope"=>"read_orders"}`,
      `{:password=>"${TOKEN}"}`,
      `Array\n(\n    [api_key] => ${TOKEN}\n)`,
      `array (\n  'client_secret' => '${TOKEN}',\n)`,
    ]) {
      expect(JSON.stringify(redactInput({ body: { note: text } }))).not.toContain(TOKEN);
      expect(JSON.stringify(redactOutput({ error: text }))).not.toContain(TOKEN);
    }
  });

  it('hostile runs of "=>" cost about what prose does', () => {
    const hostile = ['password=>'.repeat(10_000), '"token" => "'.repeat(8_000), `${'a'.repeat(100_000)}=>x`, '[api_key] =>\n'.repeat(7_000), '=>'.repeat(50_000)];
    expectNoWorseThanProse(hostile, secrets);
  });
});
