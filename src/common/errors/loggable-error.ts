/**
 * An arbitrary error, as a log line may hold it. An error's message is not our own text: Node's JSON.parse
 * quotes the input it failed on (a vendor body echoing a token), PostgreSQL quotes the parameter value it
 * refused, a handler's exception may carry a URL with a token in its query. Secrets never reach a log, so
 * every log site that reports a caught error goes through here, never through `err.message` directly.
 */
import { redactedHead } from '../../redaction/cut-safe-head.js';
import { redactSecretsInText } from '../../redaction/patterns.js';

/** What a log line keeps of a message: enough to tell errors apart, never a vendor body's worth. */
export const LOGGABLE_MESSAGE_MAX = 500;
/** Frames kept of a stack: where it was thrown and the way there, not every async hop. */
const STACK_FRAMES_MAX = 20;
/**
 * Redaction is linear but still costs per character: of a longer message only this head is redacted, and then capped
 * at LOGGABLE_MESSAGE_MAX. Redaction shortens text (a PEM block before the cut becomes [REDACTED]), so what stood at the
 * cut may come within the cap: the head is cut as the ledger's walker cuts a long string (redactedHead), never showing
 * part of a secret the cut split.
 */
const REDACT_INPUT_MAX = 10_000;

/** A class name (QueryFailedError, SyntaxError): anything else in `name` is not shown. */
const CLASS_NAME = /^[A-Za-z_$][\w$.]{0,63}$/;
/** A driver or system code: SQLSTATE 22P02, ECONNREFUSED, ERR_INVALID_URL. */
const ERROR_CODE = /^[A-Z0-9_]{2,40}$/;
/**
 * V8's JSON.parse messages quote the input around the failure: `Unexpected token 's', ..."n": shpat_0123"... is
 * not valid JSON`. The excerpt is cut at a few characters, so a token in it is a fragment no token shape matches:
 * the excerpt itself is dropped: from the first quote to the end of the excerpt (found by index, no backtracking).
 */
const NOT_JSON = ' is not valid JSON';
/**
 * SQLSTATE class 22 (data exception): `invalid input syntax for type uuid: "<the parameter's value>"`. The value is
 * not escaped (it may hold quotes itself): everything from the first quote to the last goes.
 */
const DATA_EXCEPTION = /^22[0-9A-Z]{3}$/;

interface ErrorFacts {
  name?: string;
  code?: string;
  message: string;
  stack?: string;
}

/** `Name: message (code X)`, redacted and capped: what a log line may say of `err`. */
export function loggableErrorText(err: unknown): string {
  const facts = factsOf(err);
  return headline(facts, loggableMessage(facts));
}

/**
 * For the logs that want the stack too (an unhandled error): the stack's opening lines repeat the message, so
 * they are replaced by the loggable headline and only its `at …` frames are kept.
 */
export function loggableErrorWithStack(err: unknown): { name?: string; code?: string; message: string; stack?: string } {
  const facts = factsOf(err);
  const message = loggableMessage(facts);
  const frames = (facts.stack ?? '')
    .split('\n')
    .filter((line) => /^\s*at /.test(line))
    .slice(0, STACK_FRAMES_MAX)
    .map((line) => cap(redactedHead(line, LOGGABLE_MESSAGE_MAX, redactLoggable)));
  return {
    ...(facts.name !== undefined ? { name: facts.name } : {}),
    ...(facts.code !== undefined ? { code: facts.code } : {}),
    message,
    ...(facts.stack !== undefined ? { stack: [headline(facts, message), ...frames].join('\n') } : {}),
  };
}

function factsOf(err: unknown): ErrorFacts {
  if (typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string') {
    const { name, message, stack, driverError } = err as { name?: unknown; message: string; stack?: unknown; driverError?: { code?: unknown } };
    // A wrapper (TypeORM's QueryFailedError) may keep the driver's code only on the error it wraps.
    const code = (err as { code?: unknown }).code ?? driverError?.code;
    return {
      ...(typeof name === 'string' && CLASS_NAME.test(name) ? { name } : {}),
      ...(typeof code === 'string' && ERROR_CODE.test(code) ? { code } : {}),
      message,
      ...(typeof stack === 'string' ? { stack } : {}),
    };
  }
  return { message: describe(err) };
}

/** Something thrown that is no Error: a string, a number, an object (whose String() may itself throw). */
function describe(err: unknown): string {
  try {
    return String(err);
  } catch {
    return `a thrown ${typeof err}`;
  }
}

/**
 * The excerpt and the quoted value go from the whole message (finding them costs an index, not a redaction), so that
 * redactedHead sees where the message really ends.
 */
function loggableMessage(facts: ErrorFacts): string {
  let text = withoutJsonExcerpt(facts.message);
  if (facts.code !== undefined && DATA_EXCEPTION.test(facts.code)) text = withoutQuotedValue(text);
  return cap(redactedHead(text, REDACT_INPUT_MAX, redactLoggable));
}

function redactLoggable(text: string): string {
  return redactSecretsInText(text, { cards: true });
}

/** Whatever the class: a wrapper may have copied a SyntaxError's message into its own. */
function withoutJsonExcerpt(text: string): string {
  const end = text.lastIndexOf(NOT_JSON);
  let start = text.indexOf('"');
  if (text.slice(start - 3, start) === '...') start -= 3;
  return end > 0 && start >= 0 && start < end ? `${text.slice(0, start)}[input not shown]${text.slice(end)}` : text;
}

function withoutQuotedValue(text: string): string {
  const start = text.indexOf('"');
  const end = text.lastIndexOf('"');
  return start >= 0 && end > start ? `${text.slice(0, start)}"[value not shown]"${text.slice(end + 1)}` : text;
}

function headline(facts: ErrorFacts, message: string): string {
  const name = facts.name !== undefined && facts.name !== 'Error' ? `${facts.name}: ` : '';
  return `${name}${message}${facts.code !== undefined ? ` (code ${facts.code})` : ''}`;
}

function cap(text: string): string {
  return text.length > LOGGABLE_MESSAGE_MAX ? `${text.slice(0, LOGGABLE_MESSAGE_MAX)}…` : text;
}
