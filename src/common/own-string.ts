/**
 * A copy of `s` that shares no memory with the string it was cut from. V8 keeps a cut of 13 or more characters (a
 * route parameter the router took out of `req.url`, an id out of a query string) as a view into the whole string, so a
 * long-lived cache keyed by one keeps its request's whole target alive: up to HTTP_MAX_HEADER_BYTES per entry with an
 * absolute-form target (`POST http://u:<16 KB>@host/v1/runs/<id>/tool-calls` routes). Every UTF-16 code unit is kept
 * (a lone surrogate too), so the copy is equal to `s` as a Map key.
 */
export const ownString = (s: string): string => Buffer.from(s, 'utf16le').toString('utf16le');
