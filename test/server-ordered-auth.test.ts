// Forwarding a cluster-ordered tag with auth on: the forwarding node passes the caller's bearer
// token on (the issuer checks it as it would the caller's own request), and TinyId's `token` in a
// header of its own (test/server-ordered-tinyid-processes.test.ts for tokens of the token file).
// Two servers on one SQLite file; the lease in the in-memory double.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { MemoryIssuerLeases } from './support/memory-issuer-leases.ts';
import { orderedStore } from './support/ordered-store.ts';
import { testServer, type TestServer } from './support/server.ts';

const ORDERS = 'orders-token-0123456789';
const ADMIN = 'admin-token-0123456789';
const directory = mkdtempSync(join(tmpdir(), 'idmint-ordered-auth-'));
const path = join(directory, 'tags.db');
const leases = new MemoryIssuerLeases(() => performance.now());
const servers: TestServer[] = [];
const urls: string[] = [];

before(async () => {
  const setup = new SqliteSegmentStore({ path });
  await setup.init();
  await setup.createTag({ tag: 'orders', step: 1000, startId: 1n });
  await setup.close();
  for (let i = 0; i < 2; i++) {
    const server = await testServer(
      {
        port: 0,
        segment: { store: `sqlite:${path}`, waitTimeoutMs: 1000 },
        snowflake: { enabled: false },
        auth: { tokens: [`${ORDERS}:orders`], adminToken: ADMIN },
      },
      { wrapSegmentStore: (store) => orderedStore(store, ['orders'], leases) },
    );
    servers.push(server);
    urls.push(await server.listen());
  }
});

after(async () => {
  for (const server of servers) await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const get = async (url: string, token?: string) => {
  const response = await fetch(url, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: response.status, text: await response.text() };
};

it("forwards with the caller's token, and refuses a caller without one", async () => {
  const [issuer, other] = urls as [string, string];
  assert.equal((await get(`${issuer}/api/segment/get/orders`, ORDERS)).text, '1');
  const forwarded = await get(`${other}/api/segment/get/orders`, ORDERS);
  assert.deepEqual(forwarded, { status: 200, text: '2' });
  assert.equal((await get(`${other}/api/segment/get/orders`)).status, 401);
  const tinyId = await get(`${other}/tinyid/id/nextIdSimple?bizType=orders&token=${ORDERS}`);
  assert.equal(tinyId.text, '3');
});
