import { Injectable } from '@nestjs/common';

/**
 * The stop announced before the drain (SHUTDOWN_DELAY_MS, main.ts): /readyz answers 503 GATEWAY_STOPPING while every
 * other request is still served, so a load balancer or Kubernetes takes the replica out of rotation before its
 * listener closes. Without a delay the drain begins at once, as before.
 */
@Injectable()
export class StopNotice {
  announced = false;

  announce(): void {
    this.announced = true;
  }
}
