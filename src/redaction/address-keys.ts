import { normalizeKey } from './redaction-keys.js';

/**
 * shippingAddress, billing_address, ShippingAddress, addresses, address, and the short form QuickBooks uses (BillAddr,
 * ShipAddr) ... but not emailAddress or ipAddress (nor emailAddr, ipAddr, macAddr).
 */
export function isAddressContainer(norm: string): boolean {
  if (!(norm.endsWith('address') || norm.endsWith('addresses') || norm.endsWith('addr'))) return false;
  return !(norm.includes('email') || norm.startsWith('ip') || norm.endsWith('ipaddress') || norm.endsWith('ipaddr') || norm.includes('mac'));
}

const ADDRESS_LINE_KEYS = new Set(['address1', 'addressline1', 'line1', 'street', 'street1', 'streetaddress']);
const POSTAL_KEYS = new Set(['zip', 'zipcode', 'postalcode', 'postcode']);
/** The members of a postal address (Shopify, Stripe, Amazon, Google spellings): what an address kept under an unrelated key is made of. */
const ADDRESS_FIELD_KEYS = new Set([
  ...ADDRESS_LINE_KEYS,
  ...POSTAL_KEYS,
  'address2',
  'address3',
  'addressline2',
  'addressline3',
  'line2',
  'line3',
  'street2',
  'street3',
  'streetname',
  'streetnumber',
  'housenumber',
  'city',
  'town',
  'locality',
  'district',
  'county',
  'state',
  'statecode',
  'stateorregion',
  'province',
  'provincecode',
  'region',
  'regioncode',
  'country',
  'countrycode',
  'countrycodev2',
  'countryname',
  // QuickBooks CountrySubDivisionCode, Lat, Long; Google lat / lng
  'countrysubdivisioncode',
  'latitude',
  'longitude',
  'lat',
  'lng',
  'lon',
  'long',
]);

/**
 * An address under an unrelated key ({location: {street, city, postal_code}}): a street line, and mostly address
 * fields; its own `id` (QuickBooks gives every address one) is not counted either way. A record that merely has a
 * street among other fields (a Salesforce Lead: Id, Company, Status, Street, PostalCode) is not one: it keeps its
 * other members, and its street goes as a personal key.
 */
export function looksLikeAddress(keys: readonly string[]): boolean {
  let line = false;
  let fields = 0;
  let counted = keys.length;
  for (const key of keys) {
    const norm = normalizeKey(key);
    if (ADDRESS_LINE_KEYS.has(norm)) line = true;
    if (ADDRESS_FIELD_KEYS.has(norm)) fields++;
    else if (norm === 'id') counted--;
  }
  return line && fields * 2 > counted;
}

/** The facts about an address kept flat beside it: address_id, addressType, address_status, address_count. */
const ADDRESS_FACT = /(?:id|ids|type|status|count)$/;

/**
 * A part of an address kept flat in a record, named address_<part> (Pipedrive address_route, address_street_number,
 * address_locality, address_admin_area_level_1, address_country): gone, but for the postal code
 * (address_postal_code) and the facts about it. Takes the normalised name; a cheap first test turns most names away.
 */
export function isFlatAddressPart(norm: string): boolean {
  if (!norm.startsWith('address') || norm.length <= 7 || norm === 'addresses') return false;
  return !isPostalKey(norm.slice(7)) && !ADDRESS_FACT.test(norm);
}

/** A record with a street line: its plain name is whoever lives or works there. */
export function hasStreetLine(keys: readonly string[]): boolean {
  return keys.some((key) => key.length <= 14 && ADDRESS_LINE_KEYS.has(normalizeKey(key)));
}

export function isPostalKey(norm: string): boolean {
  return POSTAL_KEYS.has(norm);
}
