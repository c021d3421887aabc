import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { FileLock } from './file-lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'idmint-file-lock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The pid of a process that has ended: nothing runs under it (for the next while, at least). */
function goneProcessPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('FileLock', () => {
  it('a second taker is refused, naming the holder', async () => {
    const path = join(dir, 'plain');
    const lock = await FileLock.take(path, { pid: process.pid, host: hostname(), port: 7 });
    assert.ok(lock instanceof FileLock);
    const refused = await FileLock.take(path, { pid: 1, host: hostname(), port: 8 });
    assert.ok(!(refused instanceof FileLock));
    assert.deepEqual([refused.heldBy?.pid, refused.heldBy?.port], [process.pid, 7]);
    lock.release();
  });

  it('never names the previous, gone holder while the new one writes its file', async () => {
    // The moment a race's winner has the lock and has not yet written its holder file: the file
    // still names the process before it (a CI run named that one, pid and all, in its refusal).
    const path = join(dir, 'raced');
    const lock = await FileLock.take(path, { pid: process.pid, host: hostname(), port: 7 });
    assert.ok(lock instanceof FileLock);
    const holderFile = `${path}.holder`;
    const holder = (pid: number) =>
      `${JSON.stringify({ pid, host: hostname(), port: 7, since: new Date().toISOString() })}\n`;
    writeFileSync(holderFile, holder(goneProcessPid()));
    const written = delay(200).then(() => writeFileSync(holderFile, holder(process.pid)));
    const refused = await FileLock.take(path, { pid: 1, host: hostname(), port: 8 });
    await written;
    assert.ok(!(refused instanceof FileLock));
    assert.equal(refused.heldBy?.pid, process.pid, 'the holder that has the lock now');
    lock.release();
  });
});
