import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { runIdmint } from './support/cli.ts';
import { startServe } from './support/serve-process.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-server-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** A fresh empty working directory, as a newcomer's checkout would be. */
function workdir(name: string): string {
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  return mkdtempSync(`${dir}-`);
}

/** An environment without any IDMINT_ configuration the test runner itself may carry. */
const clean = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
};

describe('idmint serve, config check, tags (CLI)', () => {
  it('serve with zero setup: tags and IDs from both modes, SIGTERM stops it', async () => {
    const cwd = workdir('zero');
    const server = await startServe([], { cwd, env: clean() });
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const created = await fetch(`${server.url}/v1/tags`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tag: 'order', step: 1000 }),
      });
      assert.equal(created.status, 201);
      assert.equal(await (await fetch(`${server.url}/api/segment/get/order`)).text(), '1');
      const snowflake = await fetch(`${server.url}/api/snowflake/get/order`);
      assert.equal(snowflake.status, 200);
      const decoded = (await (
        await fetch(`${server.url}/v1/snowflake/decode/${await snowflake.text()}`)
      ).json()) as { workerId: number };
      assert.equal(decoded.workerId, 0);
      assert.ok(
        existsSync(join(cwd, 'data', 'idmint.db')),
        'the SQLite file is created under ./data',
      );
    } finally {
      assert.equal(await server.stop('SIGTERM'), 0, server.stderr());
    }
    assert.deepEqual(
      server.logs.map((line) => line['msg']),
      [
        'acquired worker 0 from the static registry',
        'idmint listening',
        'signal received',
        'idmint shutting down',
        'released worker 0',
        'segment IDs given back to the store at shutdown',
        'idmint stopped',
      ],
    );
    // The shutdown result: the tag's 999 unissued IDs (range 1..1000, one issued) went back to the
    // store.
    const given = server.logs.find(
      (line) => line['msg'] === 'segment IDs given back to the store at shutdown',
    );
    assert.deepEqual(
      [given?.['level'], given?.['releasedIds'], given?.['wastedIds']],
      [30, 999, 0],
    );
    assert.equal(server.stderr(), '');
    // The tag survives the restart, and the next ID follows the last one (the tail was given back).
    const again = await startServe([], { cwd, env: clean() });
    try {
      assert.equal(await (await fetch(`${again.url}/api/segment/get/order`)).text(), '2');
    } finally {
      assert.equal(await again.stop('SIGINT'), 0);
    }
  });

  it('npm start runs the server, and Ctrl-C stops it cleanly', async () => {
    const dir = workdir('npm-start');
    const repo = fileURLToPath(new URL('..', import.meta.url));
    // From the checkout, as the README says; only the data paths are moved out of it.
    const env = clean({
      IDMINT_SEGMENT_STORE: `sqlite:${join(dir, 'idmint.db')}`,
      IDMINT_WORKER_STATE_DIR: dir,
    });
    const server = await startServe([], { cwd: repo, env, command: ['npm', 'start', '--'] });
    try {
      assert.match(
        await (await fetch(`${server.url}/api/snowflake/get/x`)).text(),
        /^[1-9][0-9]*$/,
      );
    } finally {
      await server.stop('SIGINT');
    }
    assert.ok(
      server.logs.some((line) => line['msg'] === 'idmint stopped'),
      JSON.stringify(server.logs),
    );
    assert.ok(existsSync(join(dir, 'idmint.db')));
  });

  it('a second signal in shutdown exits at once; a copy within a second does not', async () => {
    const server = await startServe([], { cwd: workdir('signals'), env: clean() });
    // A request whose body never finishes keeps the graceful shutdown waiting (up to its timeout).
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.on('error', () => {});
    socket.write(
      'POST /v1/tags HTTP/1.1\r\nhost: x\r\ncontent-type: ' +
        'application/json\r\ncontent-length: 100\r\n\r\n{"tag":',
    );
    await sleep(200);
    const started = performance.now();
    server.child.kill('SIGTERM');
    await sleep(50);
    server.child.kill('SIGTERM'); // as npm passes on a Ctrl-C the terminal also sent
    await server.logLine((line) => line['msg'] === 'idmint shutting down');
    await sleep(Math.max(0, 1300 - (performance.now() - started)));
    assert.equal(
      server.child.exitCode,
      null,
      `the copy of the first signal stopped the shutdown: ${server.stderr()}`,
    );
    server.child.kill('SIGINT');
    const exit = await server.exited;
    socket.destroy();
    assert.deepEqual(exit, { code: 1, signal: null }, server.stderr());
    assert.match(
      server.stderr(),
      /^idmint serve: second signal \(SIGINT\): exiting without finishing shutdown\n$/,
    );
  });

  it('serve stops before listening on a bad configuration: exit 2, one line', async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        [],
        { IDMINT_PORT: 'eighty' },
        new RegExp(
          '^idmint serve: invalid configuration: port = "eighty" \\(from IDMINT_PORT\\): ' +
            'must be an integer from 0 to 65535\\n$',
        ),
      ],
      [
        ['--layout', 'nope'],
        {},
        /snowflake\.layout = "nope" \(from --layout\): must be one of idmint, leaf/,
      ],
      [['--segment-store', 'oracle://x'], {}, /segment\.store = "oracle:\/\/x"/],
      [['--bogus'], {}, /Unknown option '--bogus'/],
    ];
    for (const [args, env, message] of cases) {
      const result = await runIdmint(['serve', ...args], { env: clean(env), cwd: workdir('bad') });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
    }
  });

  it('serve exits 1 with one line when the store, registry or layout fails', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['--segment-store', 'postgres://postgres@127.0.0.1:1/none', '--segment-timeout-ms', '2000'],
        /^idmint serve: .*postgres/,
      ],
      [
        [
          '--no-segment-enabled',
          '--worker-registry',
          'etcd://127.0.0.1:1/none',
          '--registry-timeout-ms',
          '1000',
        ],
        /^idmint serve: .*(etcd|registry)/i,
      ],
      [
        ['--no-segment-enabled', '--layout', 'baidu'],
        /^idmint serve: layout "baidu" ran out of time at 2024-11-20/,
      ],
    ];
    for (const [args, message] of cases) {
      const cwd = workdir('broken');
      const result = await runIdmint(['serve', '--port', '0', ...args], { env: clean(), cwd });
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
    }
  });

  it('config check prints every key, its value and origin, hiding tokens; --json too', async () => {
    const cwd = workdir('check');
    const file = join(cwd, 'idmint.yaml');
    writeFileSync(file, 'port: 9100\nsnowflake:\n  layout: leaf\n');
    const token = 'secret-token-0123456789';
    const result = await runIdmint(
      ['config', 'check', '--config', file, '--max-batch', '500', '--no-metrics'],
      {
        env: clean({ IDMINT_PORT: '9200', IDMINT_TOKENS: token }),
        cwd,
      },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^configuration is valid\n/);
    assert.match(result.stdout, /^port\s+9200\s+from IDMINT_PORT$/m);
    assert.match(result.stdout, /^snowflake\.layout\s+"leaf"\s+from .*idmint\.yaml$/m);
    assert.match(result.stdout, /^api\.maxBatch\s+500\s+from --max-batch$/m);
    assert.match(result.stdout, /^metrics\.enabled\s+false\s+from --metrics$/m);
    assert.match(result.stdout, /^auth\.tokens\s+\(1 hidden\)\s+from IDMINT_TOKENS$/m);
    assert.match(result.stdout, /^segment\.store\s+"sqlite:\.\/data\/idmint\.db"\s+default$/m);
    assert.ok(!result.stdout.includes(token));

    const json = await runIdmint(['config', 'check', '--json'], {
      env: clean({ IDMINT_CONFIG: file, IDMINT_LOG_REQUESTS: 'on' }),
      cwd,
    });
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as {
      valid: boolean;
      keys: Record<string, { value: unknown; origin: string }>;
    };
    assert.equal(parsed.valid, true);
    assert.deepEqual(parsed.keys['port'], { value: 9100, origin: `from ${file}` });
    assert.deepEqual(parsed.keys['log.requests'], {
      value: true,
      origin: 'from IDMINT_LOG_REQUESTS',
    });

    const bad = await runIdmint(['config', 'check'], {
      env: clean({ IDMINT_MAX_BATCH: '0' }),
      cwd,
    });
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      new RegExp(
        '^idmint config: invalid configuration: api\\.maxBatch = "0" \\(from ' +
          'IDMINT_MAX_BATCH\\): must be an integer from 1 to 1000000\\n$',
      ),
    );
    const missing = await runIdmint(['config'], { env: clean(), cwd });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /missing subcommand: idmint config check/);
  });

  it('tags list|create|set-step and db init use the configured store', async () => {
    const cwd = workdir('tags');
    const env = clean();
    const create = await runIdmint(
      ['tags', 'create', 'order', '--step', '1000', '--description', 'Orders'],
      { env, cwd },
    );
    assert.equal(create.code, 0, create.stderr);
    assert.match(
      create.stdout,
      /^TAG\s+MAX_ID\s+STEP\s+OPAQUE\s+ORDERING\s+PERIODIC\s+DESCRIPTION\n/,
    );
    assert.match(create.stdout, /\norder\s+1\s+1000\s+no\s+-\s+-\s+Orders\n$/);
    assert.equal(
      (
        await runIdmint(
          ['tags', 'create', 'big', '--step', '5', '--start-id', '9000000000000000000'],
          { env, cwd },
        )
      ).code,
      0,
    );
    const restep = await runIdmint(['tags', 'set-step', 'order', '2000', '--json'], { env, cwd });
    assert.equal(restep.code, 0, restep.stderr);
    assert.equal((JSON.parse(restep.stdout) as { step: number }).step, 2000);
    const list = await runIdmint(['tags', 'list', '--json'], { env, cwd });
    assert.deepEqual(
      list.stdout
        .trim()
        .split('\n')
        .map(
          (line) =>
            (JSON.parse(line) as { tag: string; maxId: string; step: number }).tag +
            ':' +
            (JSON.parse(line) as { maxId: string }).maxId,
        ),
      ['big:9000000000000000000', 'order:1'],
    );

    const failures: [string[], number, RegExp][] = [
      [
        ['tags', 'create', 'order', '--step', '10'],
        1,
        /^idmint tags: tag "order" already exists\n$/,
      ],
      [['tags', 'set-step', 'ghost', '10'], 1, /tag "ghost" does not exist/],
      [['tags', 'create', 'x'], 2, /missing --step N/],
      [['tags', 'create', 'bad tag', '--step', '1'], 2, /tag must be 1 to 128 characters/],
      [
        ['tags', 'set-step', 'order', '0'],
        2,
        /step must be an integer from 1 to 2147483647, got "0"/,
      ],
      [
        ['tags', 'create', 'y', '--step', '1', '--start-id=-5'],
        2,
        /--start-id must be a decimal integer/,
      ],
      [['tags', 'list', '--step', '3'], 2, /belong to "idmint tags create"/],
      [
        ['tags', 'remove', 'order'],
        2,
        /unknown subcommand "remove"; use one of: list, create, set-step/,
      ],
      [['tags'], 2, /missing argument/],
    ];
    for (const [args, code, message] of failures) {
      const result = await runIdmint(args, { env, cwd });
      assert.equal(result.code, code, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(' '));
    }

    // Another store, by --store or by the variable the server reads: db init and tags agree on it.
    const other = `sqlite:${join(cwd, 'other.db')}`;
    const init = await runIdmint(['db', 'init'], {
      env: clean({ IDMINT_SEGMENT_STORE: other, IDMINT_SEGMENT_TABLE: 'ids' }),
      cwd,
    });
    assert.equal(init.code, 0, init.stderr);
    assert.match(init.stdout, /table ids is ready in sqlite:.*other\.db/);
    assert.equal(
      (
        await runIdmint(
          ['tags', 'create', 'elsewhere', '--step', '3', '--store', other, '--table', 'ids'],
          { env, cwd },
        )
      ).code,
      0,
    );
    const elsewhere = await runIdmint(['tags', 'list'], {
      env: clean({ IDMINT_SEGMENT_STORE: other, IDMINT_SEGMENT_TABLE: 'ids' }),
      cwd,
    });
    assert.match(elsewhere.stdout, /^elsewhere\s+1\s+3\s+no\s+-\s+-$/m);
    assert.doesNotMatch(elsewhere.stdout, /order/);
  });

  it('every new command answers --help', async () => {
    for (const args of [
      ['serve', '--help'],
      ['config', '--help'],
      ['config', 'check', '-h'],
      ['tags', '--help'],
      ['tags', 'create', '--help'],
    ]) {
      const { code, stdout } = await runIdmint(args, { env: clean() });
      assert.equal(code, 0, args.join(' '));
      assert.match(stdout, /^Usage: idmint/);
      if (args[0] === 'serve')
        assert.match(
          stdout,
          /--segment-store V\s+IDMINT_SEGMENT_STORE \(default "sqlite:\.\/data\/idmint\.db"\)/,
        );
    }
    const { stdout } = await runIdmint(['--help'], { env: clean() });
    for (const name of ['serve', 'tags', 'db', 'next', 'decode', 'config'])
      assert.match(stdout, new RegExp(`^  ${name} `, 'm'));
  });
});
