import { describe, expect, it } from 'vitest';
import { orphanedPostmaster } from '../../scripts/pg-orphan.mjs';

/**
 * A PostgreSQL left running on the data folder by a gateway killed with its pg-server (kill -9 of both, killall -9
 * node) is stopped by the next start (README "Stopping"). It was taken for an orphan only when re-parented to PID 1:
 * under a child subreaper (`systemd --user`, which runs every desktop terminal and IDE; `tini -s`) its parent is the
 * subreaper, and every later start was refused ("postmaster.pid exists: is another gateway … using this data
 * folder?") until the user found and killed that postgres by hand.
 */
describe('orphanedPostmaster', () => {
  const started = ['PATH=/usr/bin', 'PG_DATA_DIR=/srv/gw/.data/pg', 'PG_PARENT_STOPS=1'];
  const byHand = ['PATH=/usr/bin', 'HOME=/var/lib/postgresql'];

  it('re-parented to PID 1: an orphan, whoever started it (as before)', () => {
    expect(orphanedPostmaster({ state: 'S', ppid: 1, environ: started, parentCmdline: ['/sbin/init'] })).toBe(true);
    expect(orphanedPostmaster({ state: 'S', ppid: 1, environ: byHand, parentCmdline: ['/sbin/init'] })).toBe(true);
    expect(orphanedPostmaster({ state: 'S', ppid: 1, environ: undefined, parentCmdline: undefined })).toBe(true);
  });

  it('re-parented to a subreaper, having been started by a pg-server: an orphan', () => {
    expect(orphanedPostmaster({ state: 'S', ppid: 812, environ: started, parentCmdline: ['/usr/lib/systemd/systemd', '--user'] })).toBe(true);
    expect(orphanedPostmaster({ state: 'S', ppid: 40, environ: started, parentCmdline: ['/sbin/tini', '-s', '--', 'npm', 'start'] })).toBe(true);
  });

  it("a live pg-server's postgres is another gateway's: never an orphan", () => {
    expect(orphanedPostmaster({ state: 'S', ppid: 2201, environ: started, parentCmdline: ['/usr/bin/node', '/srv/gw/scripts/pg-server.mjs'] })).toBe(false);
  });

  it('one started by hand, with a live parent, is never touched; nor one whose parent or environment cannot be read', () => {
    expect(orphanedPostmaster({ state: 'S', ppid: 700, environ: byHand, parentCmdline: ['-bash'] })).toBe(false);
    expect(orphanedPostmaster({ state: 'S', ppid: 700, environ: undefined, parentCmdline: ['/usr/lib/systemd/systemd', '--user'] })).toBe(false);
    expect(orphanedPostmaster({ state: 'S', ppid: 700, environ: started, parentCmdline: undefined })).toBe(false);
  });

  it('a zombie is no server', () => {
    expect(orphanedPostmaster({ state: 'Z', ppid: 1, environ: started, parentCmdline: ['/sbin/init'] })).toBe(false);
    expect(orphanedPostmaster({ state: 'Z', ppid: 812, environ: started, parentCmdline: ['/usr/lib/systemd/systemd', '--user'] })).toBe(false);
  });
});
