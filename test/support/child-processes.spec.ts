import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { killLeftoverChildren, trackChild } from './child-processes.js';

/**
 * The net under every child a spec starts (child-processes.ts): each file's end (run-log-setup.ts) kills what its own
 * hooks did not stop. (The whole path — a test timing out with a gateway on its embedded database, its child killed
 * at the file's end — was shown with an inner vitest run; here, the registry itself.)
 */
describe('killLeftoverChildren', () => {
  it('kills a tracked child still running, not one that has exited, and forgets both', async () => {
    const running = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    const done = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    trackChild(running);
    trackChild(done);
    await once(done, 'exit');
    const exited = once(running, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    expect(killLeftoverChildren()).toBe(1);
    expect((await exited)[1]).toBe('SIGKILL');
    expect(killLeftoverChildren()).toBe(0);
  });
});
