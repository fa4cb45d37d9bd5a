/** The part of autocannon 9's programmatic API the gateway benchmark uses (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    type Context = Record<string, unknown>;
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      /** Returns the request to send (a falsy value restarts the sequence). */
      setupRequest?: (req: Request, context: Context) => Request | null | undefined;
      onResponse?: (status: number, body: string, context: Context, headers: Record<string, string | string[]>) => void;
    }
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      sent: number;
      p50: number;
      p90: number;
      p99: number;
    }
    interface Options {
      url: string;
      connections?: number;
      /** seconds */
      duration?: number;
      amount?: number;
      /** seconds */
      timeout?: number;
      overallRate?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      requests?: Request[];
      excludeErrorStats?: boolean;
      title?: string;
    }
    interface Result {
      title?: string;
      duration: number;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      statusCodeStats: Record<string, { count: number }>;
      latency: Histogram;
      requests: Histogram;
      throughput: Histogram;
    }
    interface Instance extends EventEmitter {
      stop(): void;
    }
  }

  function autocannon(opts: autocannon.Options, cb: (err: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export = autocannon;
}
