/**
 * A lone UTF-16 surrogate: JSON.parse accepts `"\ud800"`, but it has no UTF-8 form, so no URL can carry it
 * (encodeURIComponent throws; URLSearchParams writes U+FFFD, another text). String.prototype.isWellFormed is ES2024,
 * past the ES2023 lib we compile against.
 */
const LONE_SURROGATE = /\p{Surrogate}/u;

export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);
