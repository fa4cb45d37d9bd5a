/**
 * What a property name says about its value. Names are compared lower-cased with
 * separators removed, so `api_key`, `apiKey`, `X-Api-Key` and `APIKEY` are one name.
 */
export function normalizeKey(key: string): string {
  // Compatibility forms first, so a full-width or ligature spelling (ｐａｓｓｗｏｒｄ, ﬁle) reads as its ASCII letters
  // instead of losing them; only keys with non-ASCII characters pay for it.
  const folded = NON_ASCII.test(key) ? key.normalize('NFKC') : key;
  return folded.toLowerCase().replace(/[^a-z0-9]/g, '');
}

const NON_ASCII = /[^\u0020-\u007e]/; // also control characters: NFKC leaves them, and they are dropped below anyway

/**
 * Whole-word secret names: short words that would hit unrelated keys as substrings ("pin" in "shipping"),
 * and the signatures of presigned / shared-access URLs: X-Amz-Signature (S3 SigV4), X-Goog-Signature (GCS V4)
 * and sig (Azure SAS) — anyone holding one can fetch the object until it expires. "signature" alone is not
 * one: signatureRequired, signature_confirmation are delivery options.
 * The other SigV4 secrets are already caught by their parts: X-Amz-Credential, X-Amz-Security-Token.
 */
const SECRET_EXACT = new Set([
  'auth',
  'creditcard',
  'pin',
  'pwd',
  'cardpin',
  'ssn',
  'cvv',
  'cvc',
  'cvv2',
  'cvc2',
  'csc',
  'securitycode',
  'otp',
  'xamzsignature',
  'xgoogsignature',
  'sig',
  // session identifiers: whoever holds one is logged in (session, connect.sid; sessionId, JSESSIONID and PHPSESSID by their parts)
  'session',
  'sid',
  'connectsid',
  'pass',
  'pw',
  // tax ids (US EIN, TIN, ITIN; Canadian SIN) and the SSN, below
  'ein',
  'tin',
  'itin',
  'sin',
]);
/** Substrings that mark a secret wherever they appear in a name (accessToken, x-shopify-access-token, dbPassword). */
const SECRET_PARTS = [
  'password',
  'passwd',
  'passphrase',
  'passcode',
  'secret',
  'token',
  'apikey',
  'accesskey',
  'privatekey',
  'authorization',
  'cookie',
  'cardnumber',
  'credential',
  'sessionid',
  'sessid',
  'encryptionkey',
  'signingkey',
  'masterkey',
  'hmackey',
  // the key of an account or an app under another name: Azure Storage AccountKey=, Cloudflare X-Auth-Key,
  // Datadog DD-APPLICATION-KEY / application_key, Azure API Management Ocp-Apim-Subscription-Key
  'accountkey',
  'authkey',
  'applicationkey',
  'appkey',
  'subscriptionkey',
  // SSN / tax ids, whatever the spelling: social_security_number, taxId, tax_identification_number, taxpayerId, national_id,
  // TaxNumber (Xero), VATNumber, national_insurance_number (UK), social_insurance_number (Canada)
  'socialsecurity',
  'taxid',
  'taxpayer',
  'taxnumber',
  'vatnumber',
  'nationalid',
  'nationalinsurance',
  'socialinsurance',
];
/**
 * The parts as one pattern (they are plain lower-case words): every key of every value and every
 * "word:" in text is asked, and one regex test costs a fraction of a dozen includes.
 */
const SECRET_PART = new RegExp(SECRET_PARTS.join('|'));

/**
 * Short secret words that are secret as any one word of a longer name too, not only as the whole of it:
 * DB_PASS, MYSQL_PWD, smtpPwd, user_pw, card[cvc], cardCvv, cvv_code, otpCode, vendor_tin, customer_ssn_last4.
 * Whole words only (see keyWords), so shipping, bypass, passenger, compass, pinned, spinner and einstein stay.
 * Not here, whole-key only: auth (auth_type, oauth_provider), session and sid (sessionCount; Twilio's AccountSid
 * and MessageSid are ids), sig.
 */
const SECRET_WORDS = new Set(['pass', 'pwd', 'pw', 'pin', 'otp', 'cvv', 'cvc', 'csc', 'ssn', 'ein', 'tin', 'itin', 'sin', 'cpf', 'nino']);
/**
 * A tax number written as two words, the second saying "number": tax_no, TaxNr, vat_id, VAT-No. Here "id" is the
 * number itself, not a word about it (TaxNumber and VATNumber are parts above, whole).
 */
const TAX_WORDS = new Set(['tax', 'vat']);
/** Words for "number" after an account or a tax word: account_no, acct_num, routing_nr, TaxNr. */
const NUMBER_WORDS = new Set(['no', 'nr', 'num', 'number']);
/**
 * A word after the secret word that makes the value a fact about the secret rather than the secret: the verdict of a
 * check (Stripe cvc_check "pass", Shopify cvv_result_code "M"), its settings, an id (Pinterest pin_id). Only these
 * spare a name: a word not listed leaves it secret, so an unforeseen name is over-redacted rather than leaked.
 */
const ABOUT_SECRET_WORDS = new Set([
  'check', 'checks', 'result', 'response', 'status', 'match', 'enabled', 'required', 'length', 'attempts', 'retries', 'id', 'ids',
]);
/**
 * India's postal code is the "PIN code": pin then code, in a name that says it is part of an address (shipping_pin_code,
 * billingPinCode), is a postcode. Anything else with the word pin is a PIN, pin_code and pinCode too: a postcode
 * over-redacted costs little, a card or device PIN leaked costs a lot. ("pincode", one word, is not the word pin.)
 */
const ADDRESS_WORDS = new Set(['address', 'shipping', 'billing', 'delivery', 'postal', 'pickup', 'ship', 'destination']);
/** Cheap first test: only a name that contains one of the short words somewhere is split into words. */
const SECRET_WORD_HINT = /p(?:ass|in|wd?)|otp|cv[vc]|csc|ssn|ein|tin|sin|cpf|nino|taxn|vat(?:id|n)/;

/** Every secret name has at least this many letters (pin, ssn, otp): a scanner of text turns shorter words ("14" of "14:05") away unasked. */
export const SECRET_NAME_MIN_LETTERS = Math.min(
  ...[...SECRET_EXACT, ...SECRET_WORDS, ...SECRET_PARTS, 'ssn'].map((word) => word.replace(/[^a-z]/g, '').length),
);

/** Whether a normalised name (normalizeKey) is secret as a whole. isSecretName also looks at its words. */
export function isSecretKey(norm: string): boolean {
  if (SECRET_EXACT.has(norm)) return true;
  // "ssn" only at an edge: "customerSsn", "ssnLast4", but not "className".
  if (norm.startsWith('ssn') || norm.endsWith('ssn')) return true;
  return SECRET_PART.test(norm);
}

/** Whether a name as written (a property, parameter or header name) names a secret: as a whole, or by one of its words. */
export function isSecretName(key: string, norm: string = normalizeKey(key)): boolean {
  return isSecretKey(norm) || (SECRET_WORD_HINT.test(norm) && hasSecretWord(keyWords(key)));
}

/** One pass each way, however many words: a name can be as long as a vendor makes it. */
function hasSecretWord(words: readonly string[]): boolean {
  const lastAbout = words.findLastIndex((word) => ABOUT_SECRET_WORDS.has(word));
  const firstAddress = words.findIndex((word) => ADDRESS_WORDS.has(word));
  // From the word before the last word about a secret: the "id" of vat_id is the number, not a word about it.
  for (let i = Math.max(0, lastAbout - 1); i < words.length; i++) {
    const word = words[i]!;
    const next = words[i + 1] ?? '';
    if (TAX_WORDS.has(word) && (NUMBER_WORDS.has(next) || next === 'id')) return true;
    if (i <= lastAbout || !SECRET_WORDS.has(word)) continue;
    if (word === 'pin' && words[i + 1] === 'code' && firstAddress >= 0 && firstAddress < i) continue;
    return true;
  }
  return false;
}

/**
 * The words of a name, lower-cased: split at anything not a letter or digit (DB_PASS, card[cvc], X-Api-Key), at
 * camelCase (smtpPwd, userPIN, PINCode) and between letters and digits (cvv2, pass1).
 */
export function keyWords(key: string): string[] {
  const folded = NON_ASCII.test(key) ? key.normalize('NFKC') : key;
  return folded
    .replace(/[a-z](?=[A-Z])|[A-Z](?=[A-Z][a-z])|[A-Za-z](?=\d)|\d(?=[A-Za-z])/g, '$& ')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
}

/** What a header or parameter name looks like: no blanks, so "Token Pack" (a product option) is not one. */
const FIELD_NAME = /^[\w.:[\]-]{1,128}$/;

/**
 * A header or parameter name that names a secret: given as data ({name: "X-Api-Key", value},
 * ["Authorization", value]) or written in text before a colon ("X-Api-Key: …", {"api_key": …} inside a string).
 */
export function isSecretFieldName(name: string): boolean {
  return FIELD_NAME.test(name) && isSecretName(name);
}

/** Where a name/value pair keeps the name: HAR and fetch headers, Postman and AWS key/value, form fields, metafields. */
const PAIR_NAME_KEYS = new Set(['name', 'key', 'header', 'headername', 'param', 'paramname', 'parameter', 'field', 'fieldname']);
const PAIR_VALUE_KEYS = new Set(['value', 'values', 'val', 'headervalue', 'paramvalue', 'fieldvalue']);

/** Takes the raw key: every object is asked, so most keys are turned away by their length before being normalised. */
export function isPairNameKey(key: string): boolean {
  return key.length <= 12 && PAIR_NAME_KEYS.has(normalizeKey(key));
}

export function isPairValueKey(norm: string): boolean {
  return PAIR_VALUE_KEYS.has(norm);
}

/** Identifiers, not free text: a 13-19 digit id that happens to pass Luhn is not a card number. */
export function isIdentifierKey(key: string): boolean {
  if (/^(?:id|ids|gid|uuid)$/i.test(key) || /(?:Id|ID|Ids|IDs|_id|_ids|-id)$/.test(key)) return true;
  const norm = normalizeKey(key);
  return norm.includes('tracking') || norm.includes('sku') || norm.includes('barcode');
}

export function isEmailKey(norm: string): boolean {
  return norm.includes('email');
}

export function isPhoneKey(norm: string): boolean {
  return (
    norm.includes('phone') ||
    norm.includes('mobile') ||
    norm.includes('fax') ||
    ['tel', 'telephone', 'cell', 'cellnumber'].includes(norm)
  );
}

const PAYMENT_KEYS = new Set([
  'iban',
  'bic',
  'swift',
  'last4',
  'lastfour',
  'last4digits',
  'cardlast4',
  'cardlastfour',
  'creditcardbin',
  'cardbin',
  'cardholder',
  'cardholdername',
  'nameoncard',
  // a masked card number still gives the issuer (BIN) and the last four: pan, masked_pan, maskedNumber, card_summary
  'pan',
  'maskedpan',
  'maskednumber',
  'cardsummary',
]);

export function isPaymentKey(norm: string): boolean {
  return PAYMENT_KEYS.has(norm);
}

/**
 * Bank account and identity-document numbers under the many names vendors give them: BankAccountDetails (Xero),
 * bank_account_number, routingNumber, sort_code, passportNo, drivers_license anywhere in the name; account_no,
 * accountNo, acct_num, routing_nr and bsb (Australia) as words. A name ending in a word about the number
 * (bank_account_id, passport_status, see ABOUT_SECRET_WORDS) names a fact about it, and stays.
 */
const ACCOUNT_NUMBER_PART = /accountnumber|bankaccount|bankdetails|routingnumber|sortcode|passport|dri(?:ver|ving)s?licen[cs]e/;
const ACCOUNT_NUMBER_HINT = /ac(?:coun|c)tn|routingn|bsb/;
const ACCOUNT_WORDS = new Set(['account', 'acct', 'routing']);

export function isAccountNumberName(key: string, norm: string): boolean {
  const part = ACCOUNT_NUMBER_PART.test(norm);
  if (!part && !ACCOUNT_NUMBER_HINT.test(norm)) return false;
  const words = keyWords(key);
  if (ABOUT_SECRET_WORDS.has(words[words.length - 1] ?? '')) return false;
  return part || words.some((word, i) => word === 'bsb' || (ACCOUNT_WORDS.has(word) && NUMBER_WORDS.has(words[i + 1] ?? '')));
}

/** Objects holding card or bank details: everything inside is redacted except the harmless facts below. */
const PAYMENT_CONTAINERS = new Set([
  'paymentdetails',
  'paymentdetail',
  'cardpaymentdetails',
  'paymentmethoddetails',
  'paymentinstrument',
  'paymentcard',
  'card',
]);
const PAYMENT_SAFE = new Set([
  'company',
  'brand',
  'wallet',
  'creditcardcompany',
  'creditcardwallet',
  'type',
  'typename',
  'gateway',
  'currency',
  'currencycode',
  'amount',
  'status',
  'kind',
  'avsresultcode',
  'cvvresultcode',
]);

export function isPaymentContainer(norm: string): boolean {
  return PAYMENT_CONTAINERS.has(norm);
}

export function isPaymentSafeLeaf(norm: string): boolean {
  return PAYMENT_SAFE.has(norm);
}

/** Personal data that is sensitive wherever it appears in a vendor result. */
const PERSONAL_KEYS = new Set([
  'dateofbirth',
  'dob',
  'birthdate',
  'birthday',
  'documentnumber',
  'personalnumber',
  'nationalid',
  'nationalidnumber',
  'idnumber',
  'taxid',
  'taxidentifier',
  'buyertaxinfo',
  'firstname',
  'lastname',
  'middlename',
  'fullname',
  'givenname',
  'familyname',
  'surname',
  'maidenname',
  'buyername',
  'customername',
  'recipientname',
  // Slack real_name (and its normalised form), Stripe bank accounts' account_holder_name, Mailchimp FNAME / LNAME
  'realname',
  'realnamenormalized',
  'displaynamenormalized',
  'accountholdername',
  'holdername',
  'fname',
  'lname',
  'address1',
  'address2',
  'address3',
  'addressline1',
  'addressline2',
  'addressline3',
  'street',
  'street1',
  'street2',
  'streetaddress',
  'streetname',
  'streetnumber',
  'housenumber',
  'ip',
  'ipaddress',
  'browserip',
  'clientip',
  'giftmessagetext',
]);

export function isPersonalKey(norm: string): boolean {
  return PERSONAL_KEYS.has(norm) || isStreetKey(norm);
}

/**
 * A street line kept flat beside other fields (Salesforce MailingStreet, BillingStreet, Stripe line1) or as a list
 * (Google addressLines).
 */
function isStreetKey(norm: string): boolean {
  return norm.endsWith('streetaddress') || /street\d?$|addresslines?\d?$|^line\d$/.test(norm);
}

/**
 * Objects that describe a person: their plain `name` is a personal name, unlike a line item's or a product's. By the
 * key they are under: customer, contact, … anywhere in it; user, owner, author, … at its end (created_by_user, a
 * repository's owner, a commit's author and committer, Salesforce CreatedBy); a charge's billing_details, an
 * order's shipping (Stripe), whole. Not billing_plan or shipping_method: those name products.
 */
const PERSON_CONTAINER =
  /customer|buyer|recipient|shopper|cardholder|person|contact|requester|submitter|assignee|committer|accountholder|(?:user|owner|author|creator|reporter|reviewer|approver|sender|member|employee|attendee|participant|subscriber|payer|createdby|modifiedby)s?$|^(?:billing|shipping)(?:details)?$/;

export function isPersonContainer(norm: string): boolean {
  return PERSON_CONTAINER.test(norm);
}

/** What a record says it is: Stripe `object`, GitHub `type`, GraphQL `__typename`, Salesforce `attributes.type`. */
const PERSON_TYPES = new Set(['customer', 'contact', 'lead', 'user', 'person', 'individual', 'member', 'employee', 'candidate', 'subscriber']);
/** Organisations and bots: a GitHub organisation or bot has a login too, but its name is nobody's. */
const NON_PERSON_TYPES = new Set(['organization', 'organisation', 'company', 'business', 'account', 'shop', 'team', 'bot']);

/** true when a record's type says it is a person, false when it says it is not one, undefined when it does not say. */
export function isPersonType(type: unknown): boolean | undefined {
  if (typeof type !== 'string' || type.length > 12) return undefined;
  const lower = type.toLowerCase();
  return PERSON_TYPES.has(lower) ? true : NON_PERSON_TYPES.has(lower) ? false : undefined;
}

/** Members only a person, or a person's account, has beside its name: GitHub's login, a username, a first or last name. */
const PERSON_SIGNAL_KEYS = new Set(['login', 'username', 'firstname', 'lastname', 'givenname', 'familyname', 'realname']);

/** Takes the raw key: asked of every member of a record with a name, so most keys are turned away by their length. */
export function isPersonSignalKey(key: string): boolean {
  return key.length <= 12 && PERSON_SIGNAL_KEYS.has(normalizeKey(key));
}

export function isPersonNameKey(norm: string): boolean {
  return norm === 'name' || norm === 'displayname' || norm === 'nickname';
}

/** shippingAddress, billing_address, ShippingAddress, addresses, address ... but not emailAddress or ipAddress. */
export function isAddressContainer(norm: string): boolean {
  if (!(norm.endsWith('address') || norm.endsWith('addresses'))) return false;
  return !(norm.includes('email') || norm.startsWith('ip') || norm.endsWith('ipaddress') || norm.includes('mac'));
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
  'latitude',
  'longitude',
]);

/**
 * An address under an unrelated key ({location: {street, city, postal_code}}): a street line, and mostly address
 * fields. A record that merely has a street among other fields (a Salesforce Lead: Id, Company, Status, Street,
 * PostalCode) is not one: it keeps its other members, and its street goes as a personal key.
 */
export function looksLikeAddress(keys: readonly string[]): boolean {
  let line = false;
  let fields = 0;
  for (const key of keys) {
    const norm = normalizeKey(key);
    if (ADDRESS_LINE_KEYS.has(norm)) line = true;
    if (ADDRESS_FIELD_KEYS.has(norm)) fields++;
  }
  return line && fields * 2 > keys.length;
}

/** A record with a street line: its plain name is whoever lives or works there. */
export function hasStreetLine(keys: readonly string[]): boolean {
  return keys.some((key) => key.length <= 14 && ADDRESS_LINE_KEYS.has(normalizeKey(key)));
}

export function isPostalKey(norm: string): boolean {
  return POSTAL_KEYS.has(norm);
}

/** What output redaction hides by the name alone, besides secrets (isSecretName) and addresses (isAddressContainer). */
export function isPersonalDataName(key: string, norm: string): boolean {
  return isEmailKey(norm) || isPhoneKey(norm) || isPaymentKey(norm) || isPersonalKey(norm) || isAccountNumberName(key, norm);
}

/** Identity-document extraction (Jumio `capabilities.extraction[]`): only these facts are kept. */
const KYC_SAFE = new Set(['type', 'subtype', 'issuingcountry', 'label', 'id', 'score', 'classifier', 'category', 'status']);

export function isKycContainer(norm: string): boolean {
  return norm === 'extraction';
}

export function isKycSafeLeaf(norm: string): boolean {
  return KYC_SAFE.has(norm);
}
