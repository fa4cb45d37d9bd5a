/**
 * One node:http server on 127.0.0.1 hosting every emulated vendor. It routes a
 * request to the first vendor module that claims it, applies scripted faults,
 * and records every request so tests can assert what reached the "vendor" and
 * whether it was applied. It is also the benchmark's floor: nothing is logged
 * per request and the hot path does no more than parse, route and record.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VendorKey } from '../vendors/vendor-handler.js';
import {
  genericFaultResponse,
  hugeResponse,
  malformedResponse,
  notFoundResponse,
  nowMs,
  toEmuRequest,
  truncatedResponse,
  writeCutResponse,
  writeResponse,
} from './emulator-http.js';
import type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec, RecordedRequest } from './emulator.types.js';

/**
 * A FaultSpec that can also target one operation by its body: GraphQL sends
 * every query and mutation to the same path, so a path cannot tell a refund
 * from the read that precedes it.
 */
export interface EmulatorFault extends FaultSpec {
  bodyMatch?: RegExp;
}

/**
 * Optional on an EmulatedVendor: its own answer for a `status` fault without a
 * body and for `throttled` (e.g. Shopify's THROTTLED GraphQL error). Returning
 * undefined falls back to the generic answer.
 */
export interface FaultResponder {
  faultResponse(fault: FaultSpec, req: EmuRequest): EmuResponse | undefined;
}

/**
 * Optional on an EmulatedVendor: told that a request has started a slow run at
 * the vendor (`status_then_apply`), so that a duplicate arriving meanwhile is
 * answered as the vendor would answer it (Shopify: the same @idempotent key is
 * "currently in progress"). Returns the function that marks the run finished.
 */
export interface InFlightTracker {
  beginProcessing(req: EmuRequest): () => void;
}

interface ActiveFault {
  spec: EmulatorFault;
  remaining: number;
}

function hasFaultResponder(v: EmulatedVendor | undefined): v is EmulatedVendor & FaultResponder {
  return typeof (v as Partial<FaultResponder> | undefined)?.faultResponse === 'function';
}

function hasInFlightTracker(v: EmulatedVendor | undefined): v is EmulatedVendor & InFlightTracker {
  return typeof (v as Partial<InFlightTracker> | undefined)?.beginProcessing === 'function';
}

function matches(re: RegExp, text: string): boolean {
  re.lastIndex = 0; // a /g or /y pattern would otherwise carry state between requests
  return re.test(text);
}

export class VendorEmulator {
  readonly requests: RecordedRequest[] = [];
  /**
   * Most records kept; the oldest tenth is dropped beyond it. Unlimited for
   * tests; a long-running process (main.ts, the benchmark) sets it so the log
   * cannot grow without bound at tens of thousands of requests a second.
   */
  recordLimit = Infinity;
  private readonly vendors: EmulatedVendor[] = [];
  private faults: ActiveFault[] = [];
  private server?: http.Server;
  private baseUrl?: string;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(vendors: EmulatedVendor[] = []) {
    for (const v of vendors) this.register(v);
  }

  get url(): string {
    if (!this.baseUrl) throw new Error('vendor emulator is not started');
    return this.baseUrl;
  }

  async start(port = 0): Promise<string> {
    if (this.baseUrl) return this.baseUrl;
    const server = http.createServer((req, res) => this.onRequest(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.baseUrl = undefined;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  register(v: EmulatedVendor): void {
    this.vendors.push(v);
  }

  vendor<T extends EmulatedVendor>(key: VendorKey): T {
    const found = this.vendors.find((v) => v.vendor === key);
    if (!found) throw new Error(`no emulated vendor "${key}" is registered`);
    return found as T;
  }

  fault(spec: EmulatorFault): void {
    const times = spec.times ?? 1;
    if (times > 0) this.faults.push({ spec, remaining: times });
  }

  clearFaults(): void {
    this.faults = [];
  }

  reset(): void {
    this.requests.length = 0;
    this.faults = [];
    for (const v of this.vendors) v.reset();
  }

  count(filter: { vendor?: VendorKey; path?: RegExp; method?: string; applied?: boolean } = {}): number {
    let n = 0;
    for (const r of this.requests) {
      if (filter.vendor !== undefined && r.vendor !== filter.vendor) continue;
      if (filter.method !== undefined && r.method !== filter.method.toUpperCase()) continue;
      if (filter.applied !== undefined && r.applied !== filter.applied) continue;
      if (filter.path && !matches(filter.path, r.path)) continue;
      n++;
    }
    return n;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const receivedAt = nowMs();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.dispatch(req, res, Buffer.concat(chunks), receivedAt).catch(() => {
        // A vendor module threw: answer like a broken vendor would, never crash the emulator.
        writeResponse(res, { status: 500, body: { error: 'emulator vendor module failed' } });
      });
    });
  }

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse, rawBody: Buffer, receivedAt: number): Promise<void> {
    const emu = toEmuRequest(req, rawBody);
    const vendor = this.vendors.find((v) => v.handles(emu));
    emu.vendor = vendor?.vendor;
    const record: RecordedRequest = {
      vendor: vendor?.vendor,
      method: emu.method,
      path: emu.path,
      query: emu.query.toString(),
      headers: emu.headers,
      body: rawBody.toString('utf8'),
      receivedAt,
      applied: false,
    };
    this.requests.push(record);
    if (this.requests.length > this.recordLimit) this.requests.splice(0, Math.max(1, Math.floor(this.recordLimit / 10)));
    const fault = this.takeFault(emu);

    const answer = (response: EmuResponse): void => {
      writeResponse(res, response);
      record.finishedAt = nowMs();
    };
    const apply = async (): Promise<EmuResponse> => {
      if (!vendor) return notFoundResponse();
      record.applied = true;
      return vendor.handle(emu);
    };
    const destroy = (): void => {
      res.socket?.destroy();
      record.finishedAt = nowMs();
    };

    switch (fault?.kind) {
      case undefined:
        return answer(await apply());
      case 'status':
      case 'throttled':
        return answer(this.faultAnswer(vendor, fault, emu));
      case 'delay':
        await this.sleep(fault.delayMs ?? 0);
        return answer(await apply());
      case 'reset_before':
        return destroy();
      case 'reset_after':
        await apply();
        return destroy();
      case 'delay_after': {
        const response = await apply();
        await this.sleep(fault.delayMs ?? 0);
        return answer(response);
      }
      case 'malformed':
        return answer(malformedResponse());
      case 'huge':
        return answer(hugeResponse(fault.sizeBytes));
      case 'malformed_after':
        return answer(truncatedResponse(await apply()));
      case 'huge_after': {
        const response = await apply();
        const huge = hugeResponse(fault.sizeBytes);
        return answer({ status: response.status, headers: { ...response.headers, ...huge.headers }, body: huge.body });
      }
      case 'status_cut':
      case 'status_stall':
        writeCutResponse(res, this.faultAnswer(vendor, { ...fault, kind: 'status' }, emu), fault.kind === 'status_cut' ? 'close' : 'stall');
        record.finishedAt = nowMs();
        return;
      case 'status_then_apply': {
        // Marked in flight before the early answer leaves, so a client's resend always finds it.
        const finish = hasInFlightTracker(vendor) ? vendor.beginProcessing(emu) : undefined;
        answer(this.faultAnswer(vendor, { ...fault, kind: 'status', status: fault.status ?? 504 }, emu));
        await this.sleep(fault.delayMs ?? 0);
        finish?.();
        await apply();
        return;
      }
    }
  }

  private faultAnswer(vendor: EmulatedVendor | undefined, fault: FaultSpec, emu: EmuRequest): EmuResponse {
    if (fault.kind === 'status' && fault.body !== undefined) {
      return { status: fault.status ?? 500, headers: fault.headers, body: fault.body };
    }
    const own = hasFaultResponder(vendor) ? vendor.faultResponse(fault, emu) : undefined;
    if (!own) return genericFaultResponse(fault);
    return fault.headers ? { ...own, headers: { ...own.headers, ...fault.headers } } : own;
  }

  private takeFault(emu: EmuRequest): EmulatorFault | undefined {
    if (this.faults.length === 0) return undefined;
    for (let i = 0; i < this.faults.length; i++) {
      const f = this.faults[i];
      const s = f.spec;
      if (s.vendor !== undefined && s.vendor !== emu.vendor) continue;
      if (s.method !== undefined && s.method.toUpperCase() !== emu.method) continue;
      if (s.path && !matches(s.path, emu.path)) continue;
      if (s.bodyMatch && !matches(s.bodyMatch, emu.rawBody.toString('utf8'))) continue;
      f.remaining -= 1;
      if (f.remaining <= 0) this.faults.splice(i, 1);
      return s;
    }
    return undefined;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }
}
