import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A host-wide worker-ID lock directory (snowflake.lockDir) of this test process's own. The real
 * default, /tmp/idmint, is shared by every process of the machine: test files running side by
 * side, and other checkouts' runs, each start servers with static:0, which would refuse each
 * other there. So every process this test starts (`idmint serve`, `idmint next`, worker
 * processes) inherits IDMINT_WORKER_LOCK_DIR pointing here, and in-process registries and servers
 * are given it; a test of the host lock itself shares a directory of its own between processes.
 */
export const TEST_LOCK_DIR = mkdtempSync(join(tmpdir(), 'idmint-test-locks-'));
process.env['IDMINT_WORKER_LOCK_DIR'] = TEST_LOCK_DIR;
process.once('exit', () => rmSync(TEST_LOCK_DIR, { recursive: true, force: true }));
