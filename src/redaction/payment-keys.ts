import { keyWords } from './redaction-keys.js';
import { ABOUT_SECRET_WORDS, NUMBER_WORDS } from './secret-keys.js';

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
