import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HOOKS = new URL('./record-imports.mjs', import.meta.url).href;

/**
 * Runs `script` (an ES module body) in a fresh Node process and returns the URL of every module
 * it resolved, e.g. to prove that a code path never loads a database driver it does not need.
 * Whatever the script prints is returned too.
 */
export function modulesLoadedBy(
  script: string,
  options: { cwd?: string } = {},
): { urls: string[]; stdout: string } {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-imports-'));
  const log = join(dir, 'imports.log');
  try {
    const stdout = execFileSync(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        '--import',
        HOOKS,
        '--input-type=module',
        '-e',
        script,
      ],
      {
        encoding: 'utf8',
        cwd: options.cwd ?? fileURLToPath(new URL('../../', import.meta.url)),
        env: { ...process.env, IDMINT_IMPORT_LOG: log },
      },
    );
    return {
      urls: readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line !== ''),
      stdout,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Which of `packages` (npm names, or `node:` builtins) appear among `urls`. */
export function packagesIn(urls: readonly string[], packages: readonly string[]): string[] {
  return packages.filter((name) =>
    name.startsWith('node:')
      ? urls.includes(name)
      : urls.some((url) => url.includes(`/node_modules/${name}/`)),
  );
}
