// TinyId's tokens through forwarding of a cluster-ordered tag (docs/api.md, TinyId): two
// `idmint serve` processes on one SQLite file, auth from auth.tinyidTokenFile only. A TinyId
// client whose token is in the file alone draws through the node that does not issue the tag
// and gets increasing IDs from the issuer; the token stays TinyId's: refused for a biz type it
// has no row for, as a bearer token (through the forwarding node and at the issuer), and in the
// forwarding header on any other route, for any other tag, or on a request not marked forwarded.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { runIdmint } from './support/cli.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';

/** In the token file only (no idmint token is configured at all), for orders. */
const TOKEN = 'tinyid-file-token-0123456789';
/** Free text, as TinyId's tokens may be: also for orders. */
const FREE = 'free text: TinyId token ✓ 0123456789';
/** For invoices only. */
const INVOICES = 'tinyid-invoices-token-0123456789';
const directory = mkdtempSync(join(tmpdir(), 'idmint-ordered-tinyid-'));
const env = {
  IDMINT_SEGMENT_STORE: `sqlite:${join(directory, 'tags.db')}`,
  IDMINT_TINYID_TOKEN_FILE: join(directory, 'tinyid-tokens.json'),
  IDMINT_SNOWFLAKE_ENABLED: 'false',
  IDMINT_SEGMENT_WAIT_TIMEOUT_MS: '2000',
  IDMINT_LOG_LEVEL: 'info',
};
const nodes: ServeProcess[] = [];
/** The headers a forwarding node sends (forwarding.ts), as on the wire between versions. */
const FORWARDED_HEADER = 'x-idmint-forwarded';
const TINYID_TOKEN_HEADER = 'x-idmint-tinyid-token';

before(async () => {
  const rows = [
    { token: TOKEN, bizType: 'orders' },
    { token: FREE, bizType: 'orders' },
    { token: INVOICES, bizType: 'invoices' },
  ];
  writeFileSync(env.IDMINT_TINYID_TOKEN_FILE, JSON.stringify(rows));
  const init = await runIdmint(['db', 'init'], { env });
  assert.equal(init.code, 0, init.stderr);
  for (const tag of ['orders', 'invoices']) {
    const created = await runIdmint(
      ['tags', 'create', tag, '--step', '5', '--ordering', 'cluster'],
      { env },
    );
    assert.equal(created.code, 0, created.stderr);
  }
  for (let i = 0; i < 2; i++) nodes.push(await startServe([], { env }));
});

after(async () => {
  for (const node of nodes) await node.stop();
  rmSync(directory, { recursive: true, force: true });
});

const tinyId = async (url: string, bizType: string, batchSize: number, token = TOKEN) => {
  const query = new URLSearchParams({ bizType, token, batchSize: String(batchSize) });
  const response = await fetch(`${url}/tinyid/id/nextId?${query}`);
  assert.equal(response.status, 200);
  return (await response.json()) as { data: number[] | null; code: number; message: string };
};

const status = async (url: string, headers: Record<string, string>) =>
  (await fetch(url, { headers })).status;

const encoded = Buffer.from(TOKEN, 'utf8').toString('base64url');

it('draws through the node that does not issue the tag, in cluster order', async () => {
  const [issuer, other] = nodes.map((node) => node.url) as [string, string];
  // The first draw makes the first node the tag's issuer.
  const first = await tinyId(issuer, 'orders', 3);
  assert.deepEqual(first, { data: [1, 2, 3], code: 200, message: '' });
  let last = 3;
  for (let i = 0; i < 6; i++) {
    const url = i % 2 === 0 ? other : issuer;
    const answer = await tinyId(url, 'orders', 4, i % 3 === 1 ? FREE : TOKEN);
    assert.equal(answer.code, 200, answer.message);
    const ids = answer.data ?? [];
    assert.equal(ids.length, 4);
    for (const id of ids) {
      assert.ok(id > last, `${id} after ${last} (${url})`);
      last = id;
    }
  }
  const query = new URLSearchParams({ bizType: 'orders', token: FREE });
  const simple = await fetch(`${other}/tinyid/id/nextIdSimple?${query}`);
  assert.ok(Number(await simple.text()) > last);
  // Forwarded, not issued by the other node itself.
  const metrics = await (await fetch(`${other}/metrics`)).text();
  assert.match(metrics, /idmint_segment_issuer_forwarded\{tag="orders"\} [1-9]/);
});

it('refuses the token for another biz type, through either node', async () => {
  const [issuer, other] = nodes.map((node) => node.url) as [string, string];
  // invoices gets its issuer first, so the other node would forward it.
  assert.equal((await tinyId(issuer, 'invoices', 1, INVOICES)).code, 200);
  assert.equal((await tinyId(other, 'invoices', 1, INVOICES)).code, 200);
  for (const url of [other, issuer]) {
    const answer = await tinyId(url, 'invoices', 1);
    assert.deepEqual(answer, { data: null, code: 5, message: 'token is error' });
  }
});

it('never takes the token as a bearer token, nor its header beyond its tag', async () => {
  const [issuer, other] = nodes.map((node) => node.url) as [string, string];
  const bearer = { authorization: `Bearer ${TOKEN}` };
  const forwarded = { [FORWARDED_HEADER]: '1' };
  const header = { [TINYID_TOKEN_HEADER]: encoded };
  const octets = { accept: 'application/octet-stream' };
  // As a bearer token on idmint's routes, through the forwarding node and at the issuer.
  assert.equal(await status(`${other}/v1/segment/orders?count=2`, bearer), 401);
  assert.equal(await status(`${other}/api/segment/get/orders`, bearer), 401);
  assert.equal(
    await status(`${issuer}/v1/segment/orders?count=2`, { ...bearer, ...forwarded }),
    401,
  );
  // The header on a forwarded batch of its own tag is what the forwarding node sends: accepted.
  const own = { ...forwarded, ...header, ...octets };
  assert.equal(await status(`${issuer}/v1/segment/orders?count=2`, own), 200);
  // Anywhere else it grants nothing: another tag, a request not marked forwarded, other routes,
  // or beside a bearer token (checked as the bearer token it is).
  assert.equal(await status(`${issuer}/v1/segment/invoices?count=2`, own), 403);
  assert.equal(await status(`${issuer}/v1/segment/orders?count=2`, { ...header, ...octets }), 401);
  assert.equal(await status(`${other}/v1/segment/orders?count=2`, { ...header, ...octets }), 401);
  assert.equal(await status(`${issuer}/v1/segment/orders/range?size=2`, own), 401);
  assert.equal(await status(`${issuer}/api/segment/get/orders`, own), 401);
  assert.equal(await status(`${issuer}/v1/tags`, own), 401);
  assert.equal(await status(`${issuer}/v1/segment/orders?count=2`, { ...own, ...bearer }), 401);
});
