import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REQUIRE_SERVICES } from './services.ts';

/**
 * Why a tmpfs cannot be mounted here (mounting needs root, CAP_SYS_ADMIN), or undefined when it
 * can: for `describe(..., { skip })`, as describeWithServices does for a service. The skip is said
 * loudly, and under IDMINT_REQUIRE_SERVICES=1 not being able to mount is a failure.
 */
export function tmpfsSkipReason(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-mount-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir]);
    return undefined;
  } catch {
    const reason = 'cannot mount a tmpfs here (needs root)';
    if (REQUIRE_SERVICES) throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${reason}`);
    process.stderr.write(`\n!!! SKIPPING: ${reason}\n`);
    return reason;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
