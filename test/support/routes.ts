import type { INestApplication } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { RequestMethod } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { PUBLIC_KEY, ROLES_KEY } from '../../src/auth/auth.decorators.js';
import type { Role } from '../../src/auth/api-key.entity.js';

export interface RouteInfo {
  method: string;
  path: string;
  roles: Role[] | undefined;
  isPublic: boolean;
}

/** Every route the app serves, read from the controllers' own metadata. */
export function listRoutes(app: INestApplication): RouteInfo[] {
  const discovery = app.get(DiscoveryService, { strict: false });
  const scanner = app.get(MetadataScanner);
  const reflector = app.get(Reflector);
  const out: RouteInfo[] = [];
  for (const wrapper of discovery.getControllers()) {
    const instance = wrapper.instance as object | undefined;
    if (!instance || !wrapper.metatype) continue;
    const base = String(Reflect.getMetadata(PATH_METADATA, wrapper.metatype) ?? '');
    const proto = Object.getPrototypeOf(instance) as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(proto)) {
      const handler = proto[name] as object;
      const sub = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
      if (sub === undefined) continue;
      const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number];
      const path = '/' + [base, sub].map((s) => s.replace(/^\/|\/$/g, '')).filter(Boolean).join('/');
      const targets = [handler as () => void, wrapper.metatype as () => void];
      out.push({
        method,
        path,
        roles: reflector.getAllAndOverride<Role[] | undefined>(ROLES_KEY, targets),
        isPublic: !!reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets),
      });
    }
  }
  return out;
}
