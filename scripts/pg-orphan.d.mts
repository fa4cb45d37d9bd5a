/** See pg-orphan.mjs. */
export function orphanedPostmaster(p: { state: string; ppid: number; environ: readonly string[] | undefined; parentCmdline: readonly string[] | undefined }): boolean;
