import type { DataSource, EntityManager } from 'typeorm';

/** `ds` with `hook` called before every query, also those run in its transactions (the key rotation's per-batch ones). */
export function withQueryHook(ds: DataSource, hook: (sql: string) => Promise<void> | void): DataSource {
  const hooked = (query: (sql: string, params?: unknown[]) => Promise<unknown>) => async (sql: string, params?: unknown[]) => {
    await hook(sql);
    return query(sql, params);
  };
  return new Proxy(ds, {
    get(target, prop, receiver) {
      if (prop === 'query') return hooked((sql, params) => target.query(sql, params));
      if (prop === 'transaction') {
        return async (work: (m: EntityManager) => Promise<unknown>) =>
          target.transaction((m) => work(new Proxy(m, { get: (mt, mp, mr) => (mp === 'query' ? hooked((sql, params) => mt.query(sql, params)) : (Reflect.get(mt, mp, mr) as unknown)) })));
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}
