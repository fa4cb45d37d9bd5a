import { normalizeKey } from './redaction-keys.js';

/**
 * The short form QuickBooks uses (BillAddr, ShipAddr, ShipFromAddr, PrimaryAddr, OtherAddr, CompanyAddr, LegalAddr,
 * CustomerCommunicationAddr) and its kin: a postal address. Any other "…addr" (serverAddr, bindAddr, macAddr, QuickBooks
 * WebAddr: a website) is a network address or no address at all; a record under one that looks like a postal address
 * (looksLikeAddress) is still taken for one.
 */
const POSTAL_ADDR_KEYS = new Set([
  'billaddr', 'billingaddr', 'shipaddr', 'shippingaddr', 'shipfromaddr', 'primaryaddr', 'otheraddr', 'companyaddr', 'legaladdr',
  'customeraddr', 'customercommunicationaddr', 'mailingaddr', 'homeaddr', 'businessaddr', 'workaddr', 'postaladdr', 'deliveryaddr',
  'streetaddr', 'physicaladdr', 'residentialaddr',
]);

/**
 * shippingAddress, billing_address, ShippingAddress, addresses, address, and the QuickBooks short forms (BillAddr,
 * ShipAddr: POSTAL_ADDR_KEYS) ... but not emailAddress or ipAddress.
 */
export function isAddressContainer(norm: string): boolean {
  if (norm.endsWith('addr')) return POSTAL_ADDR_KEYS.has(norm);
  if (!(norm.endsWith('address') || norm.endsWith('addresses'))) return false;
  return !isNonPostalAddressName(norm);
}

/** emailAddress, ipAddress, macAddress, an email_address_country: an address, but not where anybody lives. */
function isNonPostalAddressName(norm: string): boolean {
  return norm.includes('email') || norm.startsWith('ip') || norm.includes('ipaddress') || norm.includes('mac');
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

/**
 * The parts of an address kept flat in a record (Pipedrive address_route, address_street_number, address_locality,
 * address_admin_area_level_1, address_country, address_formatted_address), as whole words after "address" at the end of
 * the normalised name, with any prefix (home_address_route, billing_address_city, postal_address_locality). Not the
 * postal code (address_postal_code), the facts about an address (address_id, address_type, address_source,
 * address_confidence, address_updated_at) nor "addressed_at": none of them is a listed part.
 */
const FLAT_ADDRESS_PART =
  /address(?:route|street(?:number|name|address|\d)?|streetnr|line\d?|housenumber|housenr|premise|subpremise|locality|sublocality(?:level\d)?|city|town|village|adminarea(?:level)?\d?|region|state|province|county|country|countrycode|countryname|district|neighbou?rhood|formattedaddress|fulladdress|lat|lng|lon|latitude|longitude|location)$/;

/**
 * A part of an address kept flat in a record, named [<prefix>_]address_<part> (FLAT_ADDRESS_PART): gone, but for the
 * postal code and the facts about it. Takes the normalised name; a cheap first test turns most names away.
 */
export function isFlatAddressPart(norm: string): boolean {
  return norm.length > 7 && norm.includes('address') && FLAT_ADDRESS_PART.test(norm) && !isNonPostalAddressName(norm);
}

/** A record with a street line: its plain name is whoever lives or works there. */
export function hasStreetLine(keys: readonly string[]): boolean {
  return keys.some((key) => key.length <= 14 && ADDRESS_LINE_KEYS.has(normalizeKey(key)));
}

export function isPostalKey(norm: string): boolean {
  return POSTAL_KEYS.has(norm);
}
