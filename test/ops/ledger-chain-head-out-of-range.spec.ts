import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { PastTheTrigger } from '../support/past-the-trigger.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * An org's chain head is its highest chain_seq, whatever row holds it, and the append-only table takes any INSERT: a
 * sealed-looking row at chain_seq 2^63 - 1 or 2^53, written with the gateway's own role, used to make the sealer's next
 * position (head + 1 in a JS number) 2^63, out of bigint's range, or 2^53 again (a unique violation). The batch's one
 * UPDATE failed, and a batch holds every org's unsealed events: sealing stopped for every org, on every pass. The head
 * is now read exactly, and an org whose chain reaches the last position a JSON number holds exactly (2^53 - 1) has its
 * chain stopped there: its verify names the row, every other org goes on being sealed.
 */
describe('a chain head written around the gateway at the end of the range', () => {
  let t: TestApp;
  let su: PastTheTrigger;
  const written: string[] = [];
  const removeAsSuperuser = (id: string) => su.query(`DELETE FROM runtime_ledger_events WHERE id = $1`, [id]);

  const sealNow = () => t.app.get(LedgerSealerService).sealNow();
  const append = (orgId: string) => t.app.get(LedgerEventsService).append([{ orgId, type: 'test.after', metadata: {} }]);
  const verify = async (orgId: string) => {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    return { status: res.status, body: res.body as Record<string, unknown> };
  };
  const unsealed = async (orgId: string) =>
    ((await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [orgId])) as { n: number }[])[0].n;

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = await PastTheTrigger.connect();
  });
  afterAll(async () => {
    // The database is shared with the rest of the run: leave no row that stops a chain.
    for (const id of written) await removeAsSuperuser(id).catch(() => undefined);
    await su?.end();
    await t?.close();
  });

  it.each([
    ['9223372036854775807', 'the last bigint'],
    ['9007199254740992', '2^53, where head + 1 was head again'],
    ['9007199254740991', '2^53 - 1, the last position a chain can hold'],
  ])('a sealed-looking row at chain_seq %s (%s) stops only its own org’s chain; verify names it; removed, the chain goes on', async (chainSeq) => {
    const victim = await createOrg(t, 'Head victim');
    const org = await createOrg(t, 'Head forged');
    await sealNow();
    const [{ id }] = (await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, chain_seq, prev_hash, hash)
       VALUES (gen_random_uuid(), $1, 'test.forged', '{}', $2::bigint, repeat('0', 64), repeat('a', 64)) RETURNING id`,
      [org, chainSeq],
    )) as { id: string }[];
    written.push(id);
    await append(org);
    await append(victim);
    const from = t.logs.length;

    expect(await sealNow()).toBe(1); // the victim's event: the pass no longer fails
    expect(await sealNow()).toBe(0);
    expect(await unsealed(victim)).toBe(0);
    expect(await unsealed(org)).toBe(1); // waits behind the row
    expect(await verify(victim)).toMatchObject({ status: 200, body: { ok: true, checked: 2 } });
    // Its own chain (org.created at 1) is intact up to the row: the break is position 2, and names the row at its exact position.
    expect(await verify(org)).toEqual({
      status: 200,
      body: { ok: false, checked: 1, brokenAt: { chainSeq: 2, eventId: id, reason: expect.stringContaining(`position ${chainSeq}`) } },
    });
    const stopped = t.logs.slice(from).filter((l) => l.includes('stopped at event'));
    expect(stopped.length).toBe(1); // once, however many passes meet it
    expect(stopped[0]).toContain(org);
    expect(stopped[0]).toContain(`position ${chainSeq}`);

    await removeAsSuperuser(id);
    await sealNow(); // a full scan that no longer meets the row lifts the stop
    await sealNow();
    expect(await unsealed(org)).toBe(0);
    expect(await verify(org)).toMatchObject({ status: 200, body: { ok: true, checked: 2 } });
  });

  it('a row at an ordinary position ahead of the head is chained after, as before: the positions it skipped are missing', async () => {
    const org = await createOrg(t, 'Head ahead');
    await sealNow();
    const [{ id }] = (await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, chain_seq, prev_hash, hash)
       VALUES (gen_random_uuid(), $1, 'test.forged', '{}', 9007199254740990, repeat('0', 64), repeat('a', 64)) RETURNING id`,
      [org],
    )) as { id: string }[];
    written.push(id);
    await append(org);
    expect(await sealNow()).toBe(1);
    const [after] = (await t.ds.query(`SELECT id, chain_seq FROM runtime_ledger_events WHERE org_id = $1 AND type = 'test.after'`, [org])) as { id: string; chain_seq: string }[];
    written.push(after.id); // it holds the last position: the org's next event would wait behind it
    expect(after.chain_seq).toBe('9007199254740991');
    expect(await verify(org)).toEqual({ status: 200, body: { ok: false, checked: 1, brokenAt: { chainSeq: 2, eventId: null, reason: 'event missing from the chain' } } });
  });
});
