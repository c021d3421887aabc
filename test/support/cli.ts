import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// Every idmint process a test starts takes its static worker-ID locks in a directory of the test's
// own.
import './lock-dir.ts';

/** Path of the `idmint` executable in this checkout. */
export const IDMINT_BIN = fileURLToPath(new URL('../../bin/idmint.js', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Where `idmint` runs unless a test says otherwise: a directory of this test process's own, not
 * the checkout, so what a command writes there (`idmint next`'s ./data/idmint-worker-N.json) is
 * the test's alone and goes with it.
 */
const DEFAULT_CWD = mkdtempSync(join(tmpdir(), 'idmint-test-cwd-'));
process.once('exit', () => rmSync(DEFAULT_CWD, { recursive: true, force: true }));

/** Runs `idmint <args>` as a separate OS process with the Node running the tests. */
export function runIdmint(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [IDMINT_BIN, ...args], {
      env: { ...process.env, ...options.env },
      cwd: options.cwd ?? DEFAULT_CWD,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
}
