import { isAccountNumberName, isPaymentKey } from './payment-keys.js';
import { normalizeKey } from './redaction-keys.js';

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
