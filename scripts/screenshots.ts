// Writes the dashboard's screenshots into docs/dashboard/ (light and dark, wide and narrow), from
// a server of its own with a few tags under load: `npm run screenshots`. Needs Debian's chromium
// (scripts/services.sh up chromium). Nothing is written outside docs/dashboard/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IdMintClient } from '../src/client/client.ts';
import { launchChromium } from '../test/support/browser.ts';
import { testServer } from '../test/support/server.ts';
import { buildDashboard } from './build-dashboard.ts';

const OUT = fileURLToPath(new URL('../docs/dashboard/', import.meta.url));
const SHOTS = [
  { name: 'light-wide', colorScheme: 'light', width: 1280, height: 900 },
  { name: 'dark-wide', colorScheme: 'dark', width: 1280, height: 900 },
  { name: 'light-narrow', colorScheme: 'light', width: 390, height: 844 },
  { name: 'dark-narrow', colorScheme: 'dark', width: 390, height: 844 },
] as const;
/** Tags of a shop, drawing at different rates (IDs per round of the load loop). */
const TAGS = [
  { tag: 'orders', step: 1000, draw: 40, description: 'Order numbers' },
  { tag: 'payments', step: 1000, draw: 15, description: 'Payment references' },
  { tag: 'invoices', step: 500, draw: 6, description: null },
  { tag: 'shipments', step: 2000, draw: 3, description: null },
  { tag: 'users', step: 200, draw: 1, description: 'Customer accounts' },
  { tag: 'coupons', step: 100, draw: 0, description: null },
] as const;
/** How long the load runs before the first screenshot: long enough for the rates to fill in. */
const WARM_UP_MS = 12_000;

const assets = mkdtempSync(join(tmpdir(), 'idmint-screenshots-'));
await buildDashboard(assets);
const server = await testServer({ port: 0, log: { level: 'warn' } }, { dashboardDir: assets });
const url = await server.listen();
const client = new IdMintClient({ url, retries: 0 });
let loading = true;
try {
  for (const { tag, step, description } of TAGS) await client.createTag({ tag, step, description });
  // A steady load, bounded in time, so every panel has something to show.
  const load = (async () => {
    const until = performance.now() + WARM_UP_MS + 60_000;
    while (loading && performance.now() < until) {
      for (const { tag, draw } of TAGS) if (draw > 0) await client.segmentBatch(tag, draw);
      await client.snowflakeBatch(20);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS));
  const browser = await launchChromium();
  try {
    for (const shot of SHOTS) {
      const page = await browser.newPage({
        viewport: { width: shot.width, height: shot.height },
        colorScheme: shot.colorScheme,
        deviceScaleFactor: 1,
      });
      await page.goto(`${url}/dashboard`);
      await page.locator('tr[data-tag="orders"]').waitFor();
      // Two more polls, so the charts are drawn at their size and hold a minute of data.
      await page.waitForTimeout(3200);
      await page.screenshot({ path: join(OUT, `${shot.name}.png`), fullPage: true });
      await page.close();
      console.log(`screenshots: docs/dashboard/${shot.name}.png`);
    }
  } finally {
    await browser.close();
  }
  loading = false;
  await load;
} finally {
  loading = false;
  await server.close();
  rmSync(assets, { recursive: true, force: true });
}
