import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { runIdmint } from './support/cli.ts';

describe('idmint CLI', () => {
  it('next --count 100000 prints 100000 distinct, increasing IDs', async () => {
    const started = Date.now();
    const { code, stdout, stderr } = await runIdmint([
      'next',
      '--count',
      '100000',
      '--worker',
      '17',
    ]);
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, 100_000);
    let last = -1n;
    for (const line of lines) {
      assert.match(line, /^[1-9][0-9]*$/);
      const id = BigInt(line);
      assert.ok(id > last, `${id} after ${last}`);
      last = id;
    }
    const parts = decomposeId(lines[0], getLayout('idmint'));
    assert.equal(parts.workerId, 17);
    assert.ok(
      parts.timestamp >= started - 5 && parts.timestamp <= Date.now(),
      `timestamp ${parts.timestamp} not within the run`,
    );
  });

  it('next defaults to one ID and honours --layout', async () => {
    const { code, stdout } = await runIdmint(['next', '--layout', 'js-safe', '-w', '63']);
    assert.equal(code, 0);
    const id = BigInt(stdout.trim());
    assert.ok(id < 2n ** 53n);
    assert.equal(decomposeId(id, getLayout('js-safe')).workerId, 63);
  });

  it('decode prints the parts human-readable and as JSON', async () => {
    const id = (
      (BigInt(Date.UTC(2026, 2, 3, 4, 5, 6, 789) - Date.UTC(2026, 0, 1)) << 22n) |
      (9n << 12n) |
      77n
    ).toString();
    const text = await runIdmint(['decode', id]);
    assert.equal(text.code, 0);
    assert.match(text.stdout, /timestamp\s+\d+ \(2026-03-03T04:05:06\.789Z\)/);
    assert.match(text.stdout, /worker\s+9\n/);
    assert.match(text.stdout, /sequence\s+77\n/);

    const json = await runIdmint(['decode', id, '--json']);
    assert.equal(json.code, 0);
    assert.deepEqual(JSON.parse(json.stdout), {
      id,
      layout: 'idmint',
      timestamp: Date.UTC(2026, 2, 3, 4, 5, 6, 789),
      date: '2026-03-03T04:05:06.789Z',
      workerId: 9,
      sequence: 77,
    });
  });

  it('decode --layout twitter includes the datacenter', async () => {
    const id = ((1n << 22n) | (21n << 17n) | (4n << 12n) | 1n).toString();
    const { stdout } = await runIdmint(['decode', id, '--layout', 'twitter', '--json']);
    const parts = JSON.parse(stdout) as Record<string, unknown>;
    assert.equal(parts['datacenterId'], 21);
    assert.equal(parts['workerId'], 4);
  });

  it("help <command> is <command> --help; serve's help shows its flags only", async () => {
    for (const name of ['serve', 'next', 'tags', 'db', 'decode', 'config']) {
      const viaHelp = await runIdmint(['help', name]);
      const viaFlag = await runIdmint([name, '--help']);
      assert.equal(viaHelp.code, 0, name);
      assert.equal(viaHelp.stdout, viaFlag.stdout, name);
      assert.match(viaHelp.stdout, new RegExp(`^Usage: idmint ${name}`));
    }
    const serve = (await runIdmint(['help', 'serve'])).stdout;
    assert.match(serve, /--segment-store V\s+IDMINT_SEGMENT_STORE/);
    for (const other of [
      '--count',
      '--step',
      '--start-id',
      '--json',
      '--store URL',
      '--timeout MS',
      '--worker W',
      '--description',
    ]) {
      assert.ok(!serve.includes(other), `serve's help shows ${other}`);
    }
  });

  it('every command answers --help', async () => {
    for (const args of [['--help'], ['next', '--help'], ['decode', '--help'], ['decode', '-h']]) {
      const { code, stdout } = await runIdmint(args);
      assert.equal(code, 0, args.join(' '));
      assert.match(stdout, /^Usage: idmint/);
    }
  });

  const failures: [string[], RegExp][] = [
    [
      ['next', '--count', '0'],
      /^idmint next: --count must be an integer from 1 to 10000000, got "0"\n$/,
    ],
    [['next', '--count', '12abc'], /--count must be an integer/],
    [['next', '--worker', '1024'], /--worker must be an integer from 0 to 1023, got "1024"/],
    [
      ['next', '--layout', 'nope'],
      new RegExp(
        '^idmint next: invalid configuration: snowflake\\.layout = "nope" \\(from ' +
          '--layout\\): must be one of idmint, ',
      ),
    ],
    [['next', '--rollback', 'sleep'], /--rollback must be one of refuse, wait, borrow, history/],
    [['next', '--bogus'], /^idmint next: Unknown option '--bogus'\n$/],
    [['next', 'extra'], /unexpected argument "extra"/],
    [['decode'], /missing argument <id>/],
    [['decode', '-5'], /ID "-5" is not a decimal integer/],
    [['decode', '9223372036854775808'], /is above 9223372036854775807/],
    [['decode', '12x'], /not a decimal integer/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['help', 'frobnicate'], /unknown command "frobnicate"/],
    // A negative number after a flag is that flag's value, and gets idmint's own message.
    [
      ['next', '--count', '-5'],
      /^idmint next: --count must be an integer from 1 to 10000000, got "-5"\n$/,
    ],
    [
      ['next', '-n', '-5'],
      /^idmint next: --count must be an integer from 1 to 10000000, got "-5"\n$/,
    ],
    [
      ['next', '--worker', '-1'],
      /^idmint next: --worker must be an integer from 0 to 1023, got "-1"\n$/,
    ],
    [['next', '--datacenter', '-0.5'], /^idmint next: --datacenter must be an integer/],
    [
      ['config', 'check', '--port', '-1'],
      new RegExp(
        '^idmint config: invalid configuration: port = "-1" \\(from --port\\): must be an ' +
          'integer from 0 to 65535\\n$',
      ),
    ],
  ];
  for (const [args, message] of failures) {
    it(`exits 2 with a one-line message for: idmint ${args.join(' ')}`, async () => {
      const { code, stdout, stderr } = await runIdmint(args);
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.match(stderr, message);
      assert.equal(stderr.trimEnd().split('\n').length, 1, `more than one line: ${stderr}`);
    });
  }

  it('exits 1 when the work itself fails: a layout whose time ran out', async () => {
    const { code, stderr } = await runIdmint(['next', '--layout', 'baidu']);
    assert.equal(code, 1);
    assert.match(stderr, /^idmint next: layout "baidu" ran out of time at 2024-11-20/);
  });
});
