/**
 * Which unknown field names a 400 may name back. A name is echoed into the problem body (and whatever logs it
 * downstream), and an admin who pastes a value where a key belongs — a token as a property name — would see it
 * repeated there. Only what looks like a field name is named; anything else is "an unknown field". A validator that knows the
 * allowed names should prefer naming those (they are never secrets) over echoing what it was sent.
 */
// Letters and underscores, a digit or two at the end (addressLine2): what field names look like. A token is long
// or mixes digits into its random part (shpat_0123…, sk_live_4eC39…), so it is never named.
const FIELD_NAME = /^[A-Za-z][A-Za-z_]{0,31}[0-9]{0,2}$/;

/** What a 400 says of an unknown field whose name it does not echo (a token pasted as a key): the same words everywhere. */
export const UNNAMED_UNKNOWN_FIELD = 'an unknown field, not named as it does not look like a field name, should not exist';

export function isEchoableFieldName(key: string): boolean {
  // A fixed name, never a secret: naming it shows a JSON "__proto__" key was read as data.
  return FIELD_NAME.test(key) || key === '__proto__';
}
