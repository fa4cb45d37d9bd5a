import { describe, expect, it } from 'vitest';
import { AMAZON_MARKETPLACES, isAmazonMarketplaceOf, parseAmazonCredentials } from './amazon.credentials.js';

const CREDS = { clientId: 'amzn1.application-oa2-client.x', clientSecret: 'secret', refreshToken: 'Atzr|r', region: 'na' };

describe('Amazon marketplaceId', () => {
  it('is one of its own region\'s marketplaces, none of another region\'s (what the PUT checks)', () => {
    for (const [region, ids] of Object.entries(AMAZON_MARKETPLACES)) {
      for (const marketplaceId of ids) {
        for (const other of ['na', 'eu', 'fe'] as const) expect(isAmazonMarketplaceOf(other, marketplaceId), `${marketplaceId} under ${other}`).toBe(other === region);
      }
    }
    for (const id of ['ZZZZ', 'atvpdkikx0der', 12, null]) expect(isAmazonMarketplaceOf('na', id)).toBe(false);
  });

  it('knows the marketplaces of each region (Amazon\'s published list)', () => {
    expect(AMAZON_MARKETPLACES.na).toEqual(expect.arrayContaining(['ATVPDKIKX0DER', 'A2EUQ1WTGCTBG2', 'A1AM78C64UM0Y8', 'A2Q3Y263D00KWC']));
    expect(AMAZON_MARKETPLACES.eu).toHaveLength(16);
    expect(AMAZON_MARKETPLACES.eu).toEqual(expect.arrayContaining(['A1PA6795UKMFR9', 'A1F83G8C2ARO7P', 'A21TJRUUN4KGV', 'A28R8C7NBKEWEA']));
    expect([...AMAZON_MARKETPLACES.fe].sort()).toEqual(['A19VAU5U5O7RUS', 'A1VC38T7YXB528', 'A39IBJ37TRP1C6']);
  });

  it('is read as stored by the handler, whichever: no call reads it, so a config stored before the PUT checked it keeps working', () => {
    expect(parseAmazonCredentials(CREDS)).toEqual(CREDS);
    expect(parseAmazonCredentials({ ...CREDS, marketplaceId: 'A1PA6795UKMFR9' })).toEqual({ ...CREDS, marketplaceId: 'A1PA6795UKMFR9' });
  });
});
