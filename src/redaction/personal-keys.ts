import { isAccountNumberName, isPaymentKey } from './payment-keys.js';
import { keyWords, normalizeKey } from './redaction-keys.js';
import { ABOUT_SECRET_WORDS } from './secret-keys.js';

export function isEmailKey(norm: string): boolean {
  return norm.includes('email');
}

/**
 * Phone numbers under names without "phone": MessageBird and Vonage msisdn, Vonage Number Insight
 * international_format_number / national_format_number, contact_number, tel_no, landline, whatsapp. Whole names only
 * for the short or common words (a telemetry field, a contact's whatsapp_template stay).
 */
const PHONE_EXACT = new Set([
  'tel', 'telephone', 'cell', 'cellnumber', 'contactnumber', 'contactno', 'contactnum', 'contactnr', 'telno', 'telnr', 'telnum', 'telnumber',
  'landline', 'landlinenumber', 'whatsapp', 'whatsappnumber', 'whatsappno',
  // WhatsApp Cloud API contacts[].wa_id: the number itself
  'waid',
]);

export function isPhoneKey(norm: string): boolean {
  return (
    norm.includes('phone') ||
    norm.includes('mobile') ||
    norm.includes('fax') ||
    norm.includes('msisdn') ||
    norm.endsWith('formatnumber') ||
    PHONE_EXACT.has(norm)
  );
}

/**
 * Identity data (KYC): dates and places of birth (Google People birthdays[], Veriff person.placeOfBirth / yearOfBirth)
 * and the numbers of identity documents. Hidden in params as in vendor results, as SSN and tax ids are (isSecretName):
 * what a KYC provider is sent is what it sends back.
 */
const IDENTITY_KEYS = new Set([
  'dateofbirth',
  'dob',
  'birthdate',
  'birthday',
  'birthdays',
  'birthdates',
  'birthyear',
  'yearofbirth',
  'birthplace',
  'placeofbirth',
  'countryofbirth',
  'cityofbirth',
  'documentnumber',
  'personalnumber',
  'nationalid',
  'nationalidnumber',
  'idnumber',
  'identitynumber',
  'identitycard',
  'idcard',
  'taxid',
  'taxidentifier',
]);
/** passportNo, passport, drivers_license, drivingLicenceNumber: anywhere in the name (as in isAccountNumberName). */
const IDENTITY_DOCUMENT_NAME = /passport|dri(?:ver|ving)s?licen[cs]e/;

/**
 * Identity data by its name, in params and vendor results alike; a passport's machine-readable zone too (mrz, mrz_line1,
 * mrzLine2: the holder's name, number and birth date). A name ending in a word about the document or the zone
 * (passport_status, passport_required, mrzStatus, mrz_check) names a fact about it, and stays. Asked of every key: a Set
 * lookup, then one short regex.
 */
export function isIdentityDataName(key: string, norm: string): boolean {
  if (IDENTITY_KEYS.has(norm)) return true;
  if (!(norm.startsWith('mrz') || IDENTITY_DOCUMENT_NAME.test(norm))) return false;
  const words = keyWords(key);
  return !ABOUT_SECRET_WORDS.has(words[words.length - 1] ?? '');
}

/** The last word of a document's name that names the document or its number: passport, drivers_license, passportNo. */
const IDENTITY_DOCUMENT_LAST_WORDS = new Set(['passport', 'passports', 'license', 'licence', 'card', 'number', 'numbers', 'no', 'nr', 'num']);

/**
 * The name in a name/value pair ({key: "passport_number", value}) that says its value is identity data: as a property
 * name, but a document's name must end in the document or its number (a Shopify metafield passport_color is no
 * identity data). Takes the name as written (a pair's name is text).
 */
export function isIdentityPairName(name: string): boolean {
  const norm = normalizeKey(name);
  if (!isIdentityDataName(name, norm)) return false;
  if (IDENTITY_KEYS.has(norm) || norm.startsWith('mrz')) return true;
  const words = keyWords(name);
  return IDENTITY_DOCUMENT_LAST_WORDS.has(words[words.length - 1] ?? '');
}

/** Personal data that is sensitive wherever it appears in a vendor result. */
const PERSONAL_KEYS = new Set([
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
  'ipaddr',
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

/**
 * What output redaction hides by the name alone, besides secrets (isSecretName), identity data (isIdentityDataName, asked
 * first: params lose it too) and addresses (isAddressContainer).
 */
export function isPersonalDataName(key: string, norm: string): boolean {
  return isEmailKey(norm) || isPhoneKey(norm) || isPaymentKey(norm) || isPersonalKey(norm) || isAccountNumberName(key, norm);
}

/**
 * Identity-document data: only these facts are kept (a check's outcome too: Onfido breakdown.mrz.result). Jumio `capabilities.extraction[]`, Onfido id_numbers[] and
 * document_numbers[] ({type, value}: the type stays), an identity document by its name (identity_document), and a
 * record under `document(s)` that shows it is one (looksLikeIdentityDocument: Veriff verification.document).
 */
const KYC_SAFE = new Set(['type', 'subtype', 'issuingcountry', 'label', 'id', 'score', 'classifier', 'category', 'status', 'result']);
/** Lists of identity numbers: a plain string in one (document_numbers: ["999228775"]) is a number too. */
const IDENTITY_NUMBER_LISTS = new Set(['idnumbers', 'documentnumbers', 'identitynumbers', 'personalnumbers', 'nationalids']);
const KYC_CONTAINERS = new Set(['extraction', 'iddocument', 'iddocuments', 'identitydocument', 'identitydocuments', ...IDENTITY_NUMBER_LISTS]);

export function isKycContainer(norm: string): boolean {
  return KYC_CONTAINERS.has(norm);
}

export function isIdentityNumberList(norm: string): boolean {
  return IDENTITY_NUMBER_LISTS.has(norm);
}

export function isKycSafeLeaf(norm: string): boolean {
  return KYC_SAFE.has(norm);
}

/** `document` is as often a contract, an invoice or a file ({title, number: "INV-1"}): it is asked what it holds. */
export function isDocumentKey(norm: string): boolean {
  return norm === 'document' || norm === 'documents';
}

/** Members only an identity document has. Not number, validUntil or country alone: an invoice or a quote has them too. */
const IDENTITY_DOCUMENT_KEYS = new Set([
  'documentnumber', 'idnumber', 'personalnumber', 'issuingcountry', 'issuingauthority', 'issuingstate', 'nationality', 'dateofbirth', 'dob',
]);
/**
 * A kind that names an identity document whatever it holds: ID_CARD, national_identity_card, RESIDENCE_PERMIT,
 * national_id (a passport or a driving licence is named by isIdentityPairName, which a pair's kind asks too).
 */
const IDENTITY_KIND_TYPE = /(?:^|_)id_?card|identity_?card|residen(?:ce|t)_?permit|national_?id/i;
/**
 * A type that names an identity document: those kinds, and PASSPORT, DRIVERS_LICENSE, driving_licence,
 * identity_document, VISA (under `document`, not a card brand: see isIdentityKind).
 */
const IDENTITY_DOCUMENT_TYPE = new RegExp(`${IDENTITY_KIND_TYPE.source}|passport|dri(?:ver|ving)s?_?licen[cs]e|identity_?document|^visa$`, 'i');
const DOCUMENT_TYPE_KEYS = new Set(['type', 'documenttype', 'kind', 'category', 'idtype']);

/** A record under `document(s)` that is an identity document: by an identity member, or by its type. */
export function looksLikeIdentityDocument(value: Record<string, unknown>, keys: readonly string[]): boolean {
  for (const key of keys) {
    if (key.length > 20) continue;
    const norm = normalizeKey(key);
    if (IDENTITY_DOCUMENT_KEYS.has(norm) || norm.startsWith('mrz')) return true;
    const type = DOCUMENT_TYPE_KEYS.has(norm) ? value[key] : undefined;
    if (typeof type === 'string' && type.length <= 64 && IDENTITY_DOCUMENT_TYPE.test(type)) return true;
  }
  return false;
}

/**
 * What the kind of a {type, value} pair must name for the value to be hidden, besides a secret (SSN, tax and national
 * ids, credentials: isSecretFieldName): identity data, or an identity document (Onfido identity_card, residence_permit).
 * Not a contact kind ({type: "email", value: 532} counts orders by channel: emails and phones are found in the text),
 * nor a card brand ({type: "visa", value: 1234}).
 */
export function isIdentityKind(name: string): boolean {
  return isIdentityPairName(name) || IDENTITY_KIND_TYPE.test(name);
}

