import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
// Every idmint process a test starts takes its static worker-ID locks in a directory of the test's own.
import './lock-dir.ts';

/** Path of the `idmint` executable in this checkout. */
export const IDMINT_BIN = fileURLToPath(new URL('../../bin/idmint.js', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `idmint <args>` as a separate OS process with the Node running the tests. */
export function runIdmint(args: readonly string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [IDMINT_BIN, ...args], {
      env: { ...process.env, ...options.env },
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}
