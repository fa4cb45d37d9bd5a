import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Options } from 'pino-http';
import type { DestinationStream } from 'pino';
import type { AppConfig } from '../config/app-config.js';

type Req = IncomingMessage & { correlationId?: string; originalUrl?: string };

/** Only these request facts are logged: no headers (Authorization, keys), no bodies, no query values. */
type Listener = (line: string) => void;
const listeners = new Set<Listener>();
let echo = true;

/**
 * Where every log line goes. nestjs-pino keeps one logger per process (a
 * module-level singleton), so instead of a stream per app there is one sink:
 * stdout, plus any listeners (tests capture lines to scan them for leaks).
 */
export const logSink: DestinationStream = {
  write(msg: string): void {
    if (echo) process.stdout.write(msg);
    for (const l of listeners) l(msg);
  },
};

/** Tests: collect every log line from now on. */
export function captureLogs(): { lines: string[]; stop: () => void } {
  const lines: string[] = [];
  const l: Listener = (line) => lines.push(line);
  listeners.add(l);
  return { lines, stop: () => listeners.delete(l) };
}

/** Tests: keep logs off the terminal (they are still captured). */
export function setLogEcho(on: boolean): void {
  echo = on;
}

export function pinoHttpOptions(config: AppConfig): [Options, DestinationStream] {
  const options: Options = {
    level: config.LOG_LEVEL,
    genReqId: (req: Req) => req.correlationId ?? 'unknown',
    customProps: (req: Req) => ({ correlationId: req.correlationId }),
    serializers: {
      req: (req: { method?: string; url?: string }) => ({ method: req.method, path: (req.url ?? '').split('?')[0] }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
    redact: {
      paths: ['req.headers', 'res.headers', '*.authorization', '*.accessToken', '*.clientSecret', '*.refreshToken', '*.secretKey', '*.password', '*.token'],
      censor: '[REDACTED]',
    },
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
      err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'info',
    autoLogging: { ignore: (req: IncomingMessage) => req.url === '/healthz' || req.url === '/metrics' },
  };
  return [options, logSink];
}
