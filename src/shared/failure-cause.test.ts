import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { IdMintError } from '../core/errors.ts';
import {
  BackendCauses,
  driverGaveUp,
  failureCause,
  saysNoAnswer,
  failureLine,
  inWords,
  probeAddress,
} from './failure-cause.ts';

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

describe("BackendCauses: one adapter's failures in words", () => {
  it("sees through a driver's own words for giving up, with the cause seen last", () => {
    const causes = new BackendCauses();
    const breaker = new Error('Execution prevented because the circuit breaker is open');
    // Nothing seen yet: no driver wording all the same.
    assert.equal(causes.of(breaker), 'not connected');
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:2379'), {
      code: 'ECONNREFUSED',
    });
    assert.equal(causes.of(refused), 'connection refused');
    assert.equal(causes.of(breaker), 'connection refused');
    // ioredis reports its reconnection errors as events; commands fail in its own words.
    const redis = new BackendCauses();
    redis.saw(Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' }));
    assert.equal(
      redis.of(new Error("Stream isn't writeable and enableOfflineQueue options is false")),
      'timed out',
    );
  });

  it('tells a timeout by the refusal seen on the side since the last success', () => {
    const causes = new BackendCauses();
    assert.equal(causes.timedOut(1000), 'timed out after 1000 ms');
    causes.saw(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    assert.equal(causes.timedOut(1000), 'connection refused');
    causes.succeeded();
    assert.equal(causes.timedOut(1000), 'timed out after 1000 ms');
  });

  it('words a connection the other end closed, and a failed gRPC connection', () => {
    const causes = new BackendCauses();
    assert.equal(causes.of(new Error('Connection terminated unexpectedly')), 'connection closed');
    const lost = Object.assign(new Error('Connection lost: The server closed the connection.'), {
      code: 'PROTOCOL_CONNECTION_LOST',
    });
    assert.equal(causes.of(lost), 'connection closed');
    assert.equal(causes.of(new Error('Exception: CONNECTION_LOSS[-4]')), 'connection closed');
    const grpc = new Error(
      '14 UNAVAILABLE: No connection established. Last error: Failed to connect',
    );
    assert.equal(causes.of(grpc), 'could not connect');
  });

  it("words a failed TLS handshake in the handshake's words", () => {
    const causes = new BackendCauses();
    causes.saw(
      Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }),
    );
    assert.equal(
      causes.of(new Error('Reached the max retries per request limit (which is 1).')),
      'TLS handshake failed: self-signed certificate',
    );
  });

  it("gives a database's own words where the system says nothing", () => {
    const causes = new BackendCauses();
    const readOnly = Object.assign(new Error('cannot execute UPDATE in a read-only transaction'), {
      code: '25006',
    });
    assert.equal(causes.of(readOnly), 'cannot execute UPDATE in a read-only transaction');
    const full = Object.assign(new Error('database or disk is full'), { errcode: 13 });
    assert.equal(causes.of(full), 'no space left on device');
  });
});

describe('failureLine', () => {
  it('names backend, role, address, the operation in words and the cause', () => {
    assert.equal(
      failureLine(
        'postgres',
        'segment store',
        'db:5432',
        'allocating a range',
        'connection refused',
      ),
      'postgres segment store at db:5432, allocating a range: connection refused',
    );
    assert.equal(
      failureLine('etcd', 'worker registry', undefined, undefined, 'timed out'),
      'etcd worker registry: timed out',
    );
    assert.equal(inWords('listTagChanges'), 'list tag changes');
  });
});

describe('saysNoAnswer', () => {
  it('tells a backend that gave no answer from one that refused in its own words', () => {
    const at = 'postgres segment store at db:5432, reading the tag list: ';
    for (const cause of ['connection refused', 'timed out', 'timed out after 2000 ms'])
      assert.equal(saysNoAnswer(`${at}${cause}`), true, cause);
    for (const cause of ['permission denied for table ids', 'read-only file system'])
      assert.equal(saysNoAnswer(`${at}${cause}`), false, cause);
  });
});
