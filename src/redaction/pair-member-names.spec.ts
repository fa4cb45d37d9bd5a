import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';

/** {name|property|attribute|variable|parameterKey, value|text|data|content|parameterValue}: the name says what the value is. */
const SECRET = 'Wk9qR2mT7xLp4Vb8Nc1Hs6Dz3Fy5Ja0Qe';
const DOB = '1956-05-12';

describe('redaction: name/value pairs under other member names', () => {
  it('Cloudflare Workers secret binding {type: "secret_text", name, text}', () => {
    const out = redactInput({ bindings: [{ type: 'secret_text', name: 'STRIPE_API_KEY', text: SECRET }] });
    expect(out).toEqual({ bindings: [{ type: 'secret_text', name: 'STRIPE_API_KEY', text: REDACTED }] });
  });
  it('HubSpot v1 {property, value}: a secret and a date of birth, in params and output', () => {
    const body = { properties: [{ property: 'client_secret', value: SECRET }, { property: 'date_of_birth', value: DOB }, { property: 'lifecyclestage', value: 'lead' }] };
    for (const out of [redactInput(body), redactOutput(body)]) {
      expect(out).toEqual({ properties: [{ property: 'client_secret', value: REDACTED }, { property: 'date_of_birth', value: REDACTED }, { property: 'lifecyclestage', value: 'lead' }] });
    }
  });
  it('{attribute, data}, {variable, content}, CloudFormation {ParameterKey, ParameterValue}', () => {
    expect(redactInput({ a: [{ attribute: 'api_token', data: SECRET }] })).toEqual({ a: [{ attribute: 'api_token', data: REDACTED }] });
    expect(redactInput({ v: [{ variable: 'DB_PASSWORD', content: SECRET }] })).toEqual({ v: [{ variable: 'DB_PASSWORD', content: REDACTED }] });
    expect(redactInput({ Parameters: [{ ParameterKey: 'DbPassword', ParameterValue: SECRET }] })).toEqual({ Parameters: [{ ParameterKey: 'DbPassword', ParameterValue: REDACTED }] });
  });
  it('the same members naming no secret stay', () => {
    const body = { bindings: [{ type: 'plain_text', name: 'ENVIRONMENT', text: 'production' }], p: [{ property: 'firstname_count', value: 3 }], m: [{ name: 'note', content: 'hello' }] };
    expect(redactInput(body)).toEqual(body);
  });
});
