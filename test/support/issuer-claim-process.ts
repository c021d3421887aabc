// A child process for the issuer-lease suite: claims one tag's issuer lease `rounds` times through
// its own store, holding each holding a while (renewing it once, half the time) and then releasing
// it or letting it expire, and prints one line per holding: `node epoch sentAt gotAt
// releasedAt|- renewedAt|-` (ms, this host's clock; renewedAt when the renewal was sent).
//
//   node issuer-claim-process.ts <table> <tag> <node> <rounds> <ttlMs> <url> [<url>...]
import { openSegmentStore, openSegmentStores } from '../../src/backends/open-segment-store.ts';
import type { IssuerLeases } from '../../src/ports/issuer-lease.ts';

const [table = '', tag = '', node = '', rounds = '0', ttl = '0', ...urls] = process.argv.slice(2);
const ttlMs = Number(ttl);
const store =
  urls.length === 1
    ? await openSegmentStore(urls[0] as string, { table, init: false })
    : await openSegmentStores(urls, { table, init: false });
const leases = (store as { issuers?: IssuerLeases }).issuers;
if (leases === undefined) throw new Error(`${store.backend} keeps no issuer leases`);
process.stderr.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lines: string[] = [];
for (let round = 0; round < Number(rounds); round++) {
  const sentAt = Date.now();
  const outcome = await leases.claimIssuer(tag, node, `http://${node}`, ttlMs);
  const gotAt = Date.now();
  if (!outcome.held) {
    await sleep(Math.min(outcome.remainingMs, 40) + Math.random() * 20);
    continue;
  }
  // Renew once half the time, a little into the lease; a renewal refused is a lost lease.
  let renewedAt = '-';
  if (Math.random() < 0.5) {
    await sleep(Math.random() * ttlMs * 0.4);
    const sent = Date.now();
    const renewed = await leases.renewIssuer(tag, node, outcome.lease.epoch, ttlMs).then(
      () => true,
      () => false,
    );
    if (renewed) renewedAt = String(sent);
  }
  // Hold for part of the TTL, then release it (half the time) or let it run out.
  await sleep(Math.random() * ttlMs * 0.4);
  let releasedAt = '-';
  if (Math.random() < 0.5) {
    releasedAt = String(Date.now());
    await leases.releaseIssuer(tag, node, outcome.lease.epoch);
  }
  lines.push(`${node} ${outcome.lease.epoch} ${sentAt} ${gotAt} ${releasedAt} ${renewedAt}`);
  // Step back a while, so the others get their turns: the test wants handovers.
  await sleep(ttlMs + Math.random() * 20);
}
await store.close();
process.stdout.write(`${lines.join('\n')}\n`);
