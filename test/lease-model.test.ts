import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { REQUIRE_SERVICES } from './support/services.ts';

// The lease protocol checked exhaustively by spin (models/lease.pml; docs/workers.md, "The lease
// protocol, checked"): the model must verify with 0 errors, and each weakened variant must be
// refuted with a trail, so the check is known to bite.

const MODEL = resolve(import.meta.dirname, '../models/lease.pml');
/** The bounds the exhaustive run uses (docs/workers.md states them). */
const BOUNDS = ['-DTMAX=5', '-DSENDS=4'];

const SPIN_MISSING =
  spawnSync('spin', ['-V'], { stdio: 'ignore' }).status === 0
    ? undefined
    : 'spin not found (apt-get install spin, or scripts/services.sh up)';

function spinSkip(): string | false {
  if (SPIN_MISSING === undefined || REQUIRE_SERVICES) return false;
  process.stderr.write(`\n!!! SKIPPING the spin model check: ${SPIN_MISSING}\n`);
  return SPIN_MISSING;
}

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Verification {
  readonly dir: string;
  readonly output: string;
  readonly errors: number;
  readonly states: number;
  readonly seconds: number;
}

function run(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (result.error !== undefined) throw result.error;
  const output = `${result.stdout}${result.stderr}`;
  assert.equal(result.status, 0, `${command} ${args.join(' ')} failed:\n${output}`);
  return output;
}

/** spin -a, gcc, pan: an exhaustive safety search (assertions) of the model with `defines`. */
function verify(defines: string[]): Verification {
  assert.equal(SPIN_MISSING, undefined, SPIN_MISSING);
  const dir = mkdtempSync(join(tmpdir(), 'idmint-spin-'));
  dirs.push(dir);
  run('spin', ['-a', ...BOUNDS, ...defines, MODEL], dir);
  run('gcc', ['-O2', '-DSAFETY', '-o', 'pan', 'pan.c'], dir);
  const result = spawnSync('./pan', ['-m100000'], { cwd: dir, encoding: 'utf8' });
  const output = result.stdout;
  assert.doesNotMatch(output, /max search depth too small/, output);
  const number = (pattern: RegExp): number => {
    const match = pattern.exec(output);
    assert.ok(match?.[1] !== undefined, `no ${pattern} in:\n${output}`);
    return Number(match[1]);
  };
  return {
    dir,
    output,
    errors: number(/errors: (\d+)/),
    states: number(/([\d.e+]+) states, stored/),
    seconds: number(/elapsed time ([\d.e+]+) seconds/),
  };
}

describe('the lease protocol model (spin)', { skip: spinSkip() }, () => {
  test('verifies exhaustively with 0 errors', () => {
    const v = verify([]);
    process.stdout.write(
      `# spin: models/lease.pml (${BOUNDS.join(' ')}): ${v.states} states stored, ` +
        `${v.seconds} s, ${v.errors} errors\n`,
    );
    assert.equal(v.errors, 0, v.output);
    assert.ok(v.states > 100_000, `suspiciously few states: ${v.states}`);
  });

  // Each weakening breaks the invariant named: the trail is the counterexample.
  const weakened = [
    ['NO_MARGIN', /assertion violated\s+!\(\(\(\(st\[0\]==4\)/],
    ['READ_BEFORE_CLAIM', /assertion violated \(recLast>=maxIssued\)|assertion violated \(\(clk/],
    ['RENEW_OVERWRITES', /assertion violated \(recLast>=maxIssued\)/],
    // Not a weakening: shows the model reaches takeovers at all (the invariants are not vacuous).
    ['NONVACUITY', /assertion violated\s+!\(takeover\)/],
  ] as const;
  for (const [variant, violated] of weakened) {
    test(`${variant}: spin finds a counterexample trail`, () => {
      const v = verify([`-D${variant}`]);
      assert.equal(v.errors, 1, v.output);
      assert.match(v.output, violated);
      assert.ok(existsSync(join(v.dir, 'lease.pml.trail')), 'no trail file written');
      const trail = run(
        'spin',
        ['-t', '-k', 'lease.pml.trail', '-p', ...BOUNDS, `-D${variant}`, MODEL],
        v.dir,
      );
      const steps = trail
        .split('\n')
        .filter((line) => /^\s*\d+:\s+proc\s+0/.test(line) && /\[\(/.test(line))
        .slice(0, 8)
        .map((line) => line.replace(/.*\[(.*)\]\s*$/, '$1'));
      assert.ok(steps.length > 0, `the trail replays no step:\n${trail.slice(0, 2000)}`);
      process.stdout.write(
        `# spin -D${variant}: counterexample after ${v.states} states; ` +
          `first events: ${steps.join(' | ')}\n`,
      );
    });
  }
});
