import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { RateLimiter } from './rate-limiter.js';

/**
 * RATE_LIMIT_RPS per API key, shared by the AuthGuard (a token per request, or a batch's cost) and the routes whose
 * cost is known only once they run (a full stored result read back: RESULT_BYTES_PER_TOKEN).
 */
@Injectable()
export class KeyRateLimiter extends RateLimiter {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    super(config.RATE_LIMIT_RPS);
  }
}

/**
 * A stored result read back in full costs a token per this many bytes beyond the first: decrypting, parsing and
 * sending a 5 MB result is some hundred small requests' work, and its answer waits in memory for a slow client.
 */
export const RESULT_BYTES_PER_TOKEN = 64 * 1024;
