import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { IdMintError } from '../core/errors.ts';
import { driverGaveUp, failureCause, probeAddress } from './failure-cause.ts';

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

describe('the cause of a backend failure, as the system gave it', () => {
  it('finds a refused connection however deep the driver wrapped it', async () => {
    const port = await closedPort();
    const refused = await new Promise<Error>((resolve) =>
      connect({ host: '127.0.0.1', port }).once('error', resolve),
    );
    const wrapped = new IdMintError('STORE_UNAVAILABLE', 'postgres store: listTagChanges failed', {
      cause: new AggregateError([refused], 'all hosts failed'),
    });
    assert.equal(failureCause(wrapped), 'connection refused');
    // gRPC (etcd) keeps the system error in its message only.
    const grpc = new Error('14 UNAVAILABLE: No connection established. connect ECONNREFUSED');
    assert.equal(failureCause(new Error('unreachable', { cause: grpc })), 'connection refused');
  });

  it("words idmint's own timeouts with their bound, and knows nothing it cannot tell", () => {
    const timedOut = new IdMintError(
      'STORE_UNAVAILABLE',
      'redis store: listTags timed out after 1000 ms',
    );
    assert.equal(failureCause(timedOut), 'timed out after 1000 ms');
    const zk = new Error(
      'zookeeper worker registry at h:1 cannot be reached: no connection within 2000 ms',
    );
    assert.equal(failureCause(zk), 'timed out after 2000 ms');
    assert.equal(
      failureCause(new Error('Execution prevented because the circuit breaker is open')),
      undefined,
    );
  });

  it("tells a driver's own word for giving up on its connection", () => {
    const etcd = new Error('Execution prevented because the circuit breaker is open');
    assert.ok(driverGaveUp(new IdMintError('REGISTRY_UNAVAILABLE', 'x', { cause: etcd })));
    assert.ok(!driverGaveUp(new Error('permission denied for table t')));
  });

  it("gives a database's refusal in its own words", () => {
    const denied = Object.assign(new Error('permission denied for table t'), { code: '42501' });
    assert.equal(
      failureCause(new Error('failed', { cause: denied })),
      'permission denied for table t',
    );
  });

  it('probes an address: refused at a closed port, nothing to say at an open one', async () => {
    const port = await closedPort();
    assert.equal(await probeAddress({ host: '127.0.0.1', port }, 5000), 'connection refused');
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const address = server.address();
      const open = typeof address === 'object' && address !== null ? address.port : 0;
      assert.equal(await probeAddress({ host: '127.0.0.1', port: open }, 5000), undefined);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
