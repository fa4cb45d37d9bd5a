import type { Role } from './api-key.entity.js';

/** Who is calling: resolved from the API key by the AuthGuard. */
export interface Principal {
  keyId: string;
  orgId: string | null;
  role: Role;
}

export const actorOf = (p: Principal): { keyId: string; role: Role } => ({ keyId: p.keyId, role: p.role });
