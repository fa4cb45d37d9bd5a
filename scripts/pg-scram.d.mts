/** See pg-scram.mjs. */
export function scramHba(text: string): string;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function scramOnly<C extends new (...args: any[]) => any>(Client: C): C;
