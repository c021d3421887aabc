import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import {
  decideRestart,
  HEALTHY_AFTER_MS,
  MAX_FAILURES_IN_A_ROW,
} from '../src/cli/restart-policy.ts';
import { StderrRelay } from '../src/cli/stderr-relay.ts';

/**
 * The supervisor's restart policy and stderr relay, without processes (test/cli-processes.test.ts
 * runs them for real).
 */

describe('restart policy of serve --processes', () => {
  it('restarts after 100 ms doubling, and gives up at the sixth end in a row', () => {
    let failures = 0;
    const delays: number[] = [];
    for (;;) {
      const decision = decideRestart(failures, 1000);
      failures = decision.failures;
      if ('giveUp' in decision) break;
      delays.push(decision.delayMs);
    }
    assert.deepEqual(delays, [100, 200, 400, 800, 1600]);
    assert.equal(failures, MAX_FAILURES_IN_A_ROW);
    assert.equal(MAX_FAILURES_IN_A_ROW, 6);
  });

  it('a child that served 30 s starts a new count, one that served less does not', () => {
    assert.deepEqual(decideRestart(5, HEALTHY_AFTER_MS), { failures: 1, delayMs: 100 });
    assert.deepEqual(decideRestart(5, HEALTHY_AFTER_MS - 1), { failures: 6, giveUp: true });
    assert.deepEqual(decideRestart(2, 0), { failures: 3, delayMs: 400 });
  });
});

describe('stderr relay of serve --processes', () => {
  it('relays whole lines and keeps the last error line, not stack frames', () => {
    const stream = new PassThrough();
    const written: string[] = [];
    const relay = new StderrRelay(stream, (text) => written.push(text));
    stream.write('idmint serve: first ');
    assert.deepEqual(written, [], 'half a line waits for its end');
    stream.write('failure\n(node:12) Warning: something\n');
    assert.equal(relay.lastError, 'idmint serve: first failure');
    stream.write(
      'file:///app/src/x.ts:3\n    throw new TypeError("boom");\n    ^\n\nTypeError: boom\n ' +
        '   at f (file:///app/src/x.ts:3:11)\n\nNode.js v24.0.0\n',
    );
    assert.equal(relay.lastError, 'TypeError: boom');
    stream.end('no newline at the end');
    return new Promise<void>((resolve) =>
      stream.on('end', () => {
        setImmediate(() => {
          assert.equal(
            written.join(''),
            'idmint serve: first failure\n(node:12) Warning: ' +
              'something\nfile:///app/src/x.ts:3\n    throw new TypeError("boom");\n    ' +
              '^\n\nTypeError: boom\n    at f (file:///app/src/x.ts:3:11)\n\nNode.js ' +
              'v24.0.0\nno newline at the end\n',
          );
          assert.equal(relay.lastError, 'TypeError: boom');
          resolve();
        });
      }),
    );
  });
});
