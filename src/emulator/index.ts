/**
 * The vendor emulator's public surface: the server, the vendor modules, and
 * `createFullEmulator()` for the local demo, the benchmark and e2e tests.
 */
import { AmazonEmulator } from './amazon.emulator.js';
import { JumioEmulator } from './jumio.emulator.js';
import { NangoEmulator } from './nango.emulator.js';
import { ShopifyEmulator } from './shopify.emulator.js';
import { VendorEmulator } from './vendor-emulator.js';

export type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec, RecordedRequest } from './emulator.types.js';
export { SHOPIFY_EMULATOR_TOKEN } from './shopify.fixtures.js';
export { AmazonEmulator, JumioEmulator, NangoEmulator, ShopifyEmulator, VendorEmulator };
export type { EmulatorFault, FaultResponder, InFlightTracker } from './vendor-emulator.js';

/** An emulator (not started) hosting every vendor the gateway speaks to. */
export function createFullEmulator(): VendorEmulator {
  return new VendorEmulator([new ShopifyEmulator(), new AmazonEmulator(), new JumioEmulator(), new NangoEmulator()]);
}
