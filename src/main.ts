/**
 * The gateway's entry point (`npm start`, the image's CMD). The stop signals get their handlers first
 * (stop-signals.ts, Node built-ins only); the gateway's modules load after, with a dynamic import: static imports
 * would all be loaded before any line here ran, and a SIGTERM in those seconds was ignored by Node as PID 1.
 */
import './stop-signals.js';

await import('./gateway-main.js');
