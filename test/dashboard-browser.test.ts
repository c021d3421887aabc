import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { buildDashboard } from '../scripts/build-dashboard.ts';
import { IdMintClient } from '../src/client/client.ts';
import { browserSkipReason, launchChromium, watchProblems } from './support/browser.ts';
import { testServer, type TestServer } from './support/server.ts';

// The dashboard in a real browser (Debian's chromium through playwright-core), against a real
// server over a socket, built from the sources as `npm run build` builds it. Every wait is for a
// condition, never a fixed time: the page polls every 1.5 s and the server samples every second,
// and on a loaded machine either can be late.

const ADMIN = 'admin-token-0123456789';
const PUBLIC = 'public-token-0123456789';
/** Long enough for a few polls and samples on a loaded 2-core machine. */
const WAIT_MS = 30_000;

const skip = browserSkipReason();

/** A server listening on a free loopback port, serving the dashboard built for this file. */
async function dashboardServer(
  assets: string,
  values: Record<string, unknown> = {},
): Promise<{ server: TestServer; url: string }> {
  const server = await testServer({ port: 0, ...values }, { dashboardDir: assets });
  return { server, url: await server.listen() };
}

// The callbacks passed to page.evaluate and waitForFunction run in the page. This file is
// type-checked without the DOM's types (they must not leak into the server's code), so the few
// page globals those callbacks use are declared here, for this module only. (Strings instead of
// functions would not do: the page's CSP forbids eval, which Playwright needs for them.)
interface PageElement {
  readonly tagName: string;
  readonly id: string;
  readonly textContent: string | null;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): { readonly length: number };
  readonly documentElement: { readonly scrollWidth: number };
  readonly body: unknown;
  readonly activeElement: PageElement | null;
};
declare const window: { readonly innerWidth: number };
declare function getComputedStyle(element: unknown): { readonly backgroundColor: string };
type HTMLElement = PageElement;

/** Text of a tag row's cell, by test id. */
function cell(page: Page, tag: string, testId: string) {
  return page.locator(`tr[data-tag="${tag}"] [data-testid="${testId}"]`);
}

describe('the dashboard in Chromium', { skip: skip ?? false }, () => {
  let assets: string;
  let browser: Browser;

  before(async () => {
    assets = mkdtempSync(join(tmpdir(), 'idmint-dashboard-browser-'));
    await buildDashboard(assets);
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    if (assets !== undefined) rmSync(assets, { recursive: true, force: true });
  });

  it('loads without console errors, light and dark, desktop and phone', {
    timeout: 120_000,
  }, async () => {
    const { server, url } = await dashboardServer(assets);
    const client = new IdMintClient({ url, retries: 0 });
    try {
      for (const tag of ['orders', 'payments', 'a-rather-long-tag-name.with.parts:v2'])
        await client.createTag({ tag, step: 100 });
      await client.segmentBatch('orders', 5);
      const backgrounds = new Map<string, string>();
      for (const colorScheme of ['light', 'dark'] as const) {
        for (const viewport of [
          { width: 1280, height: 900 },
          { width: 390, height: 844 },
        ]) {
          const context = await browser.newContext({ viewport, colorScheme });
          const page = await context.newPage();
          const problems = watchProblems(page);
          try {
            await page.goto(`${url}/`);
            await page.locator('tr[data-tag="orders"]').waitFor({ timeout: WAIT_MS });
            await page.locator('#snowflake-title').waitFor();
            await page.locator('#server-title').waitFor();
            // A few more polls, so a failure of a later one would show too.
            const position = cell(page, 'orders', 'position');
            assert.equal(await position.textContent(), '6');
            await page.waitForFunction(
              () => document.querySelectorAll('.chart canvas').length >= 2,
              undefined,
              { timeout: WAIT_MS },
            );
            const overflow = await page.evaluate(
              () => document.documentElement.scrollWidth - window.innerWidth,
            );
            assert.ok(
              overflow <= 0,
              `${colorScheme} ${viewport.width} px: the page is ${overflow} px wider than ` +
                `the viewport`,
            );
            backgrounds.set(
              colorScheme,
              await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
            );
            assert.deepEqual(problems.errors, [], `${colorScheme} ${viewport.width} px`);
          } finally {
            await context.close();
          }
        }
      }
      assert.notEqual(backgrounds.get('light'), backgrounds.get('dark'), 'dark differs from light');

      // Keyboard: Tab reaches the search box and the sort buttons; Enter on one sorts the table.
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems = watchProblems(page);
      try {
        await page.goto(`${url}/dashboard`);
        await page.locator('tr[data-tag="orders"]').waitFor({ timeout: WAIT_MS });
        const reached: string[] = [];
        for (let i = 0; i < 25; i++) {
          await page.keyboard.press('Tab');
          reached.push(
            await page.evaluate(() => {
              const element = document.activeElement as HTMLElement | null;
              return element === null
                ? ''
                : `${element.tagName.toLowerCase()}:` +
                    (element.id || element.textContent?.trim() || '');
            }),
          );
        }
        assert.ok(
          reached.includes('input:tag-search'),
          `Tab reaches the search box: ${reached.join(', ')}`,
        );
        const rateSort = reached.find((r) => r.startsWith('button:IDs/s'));
        assert.ok(rateSort !== undefined, `Tab reaches the sort buttons: ${reached.join(', ')}`);
        await page.getByRole('button', { name: /^IDs\/s/ }).focus();
        await page.keyboard.press('Enter');
        await page
          .locator('th[aria-sort="descending"]', { hasText: 'IDs/s' })
          .waitFor({ timeout: WAIT_MS });
        await page.keyboard.press('Enter');
        await page
          .locator('th[aria-sort="ascending"]', { hasText: 'IDs/s' })
          .waitFor({ timeout: WAIT_MS });
        // The focus stays on the button across refreshes (keyed rows, no re-mount).
        await page.waitForTimeout(0);
        assert.match(
          await page.evaluate(() => document.activeElement?.textContent ?? ''),
          /^IDs\/s/,
        );
        // A tag drawn from shows the step of its latest range; one not yet drawn from (step 0 in
        // the status) its configured step, which its first load takes, marked as such.
        const stepCell = async (tag: string) =>
          (await page.locator(`tr[data-tag="${tag}"] td[data-label="Step"]`).textContent()) ?? '';
        assert.equal(await stepCell('orders'), '100');
        assert.equal(await stepCell('payments'), '100configured');
        // Search narrows the table on the server's side.
        await page.locator('#tag-search').fill('pay');
        await page.waitForFunction(
          () => document.querySelectorAll('tr[data-tag]').length === 1,
          undefined,
          { timeout: WAIT_MS },
        );
        assert.equal(await page.locator('tr[data-tag]').getAttribute('data-tag'), 'payments');
        // The count of tags in use beside the total; a tag created on this node is in use here.
        assert.match((await page.locator('#tags-title').textContent()) ?? '', /3 · 3 in use/);
        await page.getByLabel('In use only').check();
        await page.locator('#tag-search').fill('');
        await page.waitForFunction(
          () => document.querySelectorAll('tr[data-tag]').length === 3,
          undefined,
          { timeout: WAIT_MS },
        );
        assert.deepEqual(problems.errors, []);
      } finally {
        await page.close();
      }
    } finally {
      await server.close();
    }
  });

  it('under load from a client, the IDs/s and the range positions change between two reads', {
    timeout: 120_000,
  }, async () => {
    const { server, url } = await dashboardServer(assets);
    const client = new IdMintClient({ url, retries: 0 });
    let drawing = true;
    let load: Promise<void> | undefined;
    const page = await browser.newPage();
    const problems = watchProblems(page);
    try {
      await client.createTag({ tag: 'busy', step: 1000 });
      await client.segment('busy');
      await page.goto(`${url}/dashboard`);
      const position = cell(page, 'busy', 'position');
      await position.waitFor({ timeout: WAIT_MS });
      const before = await position.textContent();
      // A bounded load: at most two minutes, stopped as soon as the page has seen it.
      load = (async () => {
        const until = performance.now() + 120_000;
        while (drawing && performance.now() < until) {
          await client.segmentBatch('busy', 50);
          await client.snowflakeBatch(20);
        }
      })();
      await page.waitForFunction(
        (previous) =>
          document.querySelector('tr[data-tag="busy"] [data-testid="position"]')?.textContent !==
          previous,
        before,
        { timeout: WAIT_MS },
      );
      // The one ID drawn before the page opened is about 1 ID/s: the load makes it hundreds.
      await page.waitForFunction(
        () => {
          const text =
            document.querySelector('tr[data-tag="busy"] [data-testid="tag-rate"]')?.textContent ??
            '0';
          const scale = text.endsWith('k') ? 1000 : text.endsWith('M') ? 1e6 : 1;
          return Number.parseFloat(text.replace(/,/g, '')) * scale > 20;
        },
        undefined,
        { timeout: WAIT_MS },
      );
      await page.waitForFunction(
        () =>
          !['0 IDs/s', '— IDs/s'].includes(
            document.querySelector('[data-testid="snowflake-rate"]')?.textContent ?? '0 IDs/s',
          ),
        undefined,
        { timeout: WAIT_MS },
      );
      const first = await position.textContent();
      await page.waitForFunction(
        (previous) =>
          document.querySelector('tr[data-tag="busy"] [data-testid="position"]')?.textContent !==
          previous,
        first,
        { timeout: WAIT_MS },
      );
      assert.ok(
        BigInt((await position.textContent()) ?? '0') > BigInt(first ?? '0'),
        'the position moves forwards',
      );
      assert.deepEqual(problems.errors, []);
    } finally {
      drawing = false;
      await load;
      await page.close();
      await server.close();
    }
  });

  it('creates and changes tags in the dialogs, showing server errors', {
    timeout: 120_000,
  }, async () => {
    const { server, url } = await dashboardServer(assets, { auth: { adminToken: ADMIN } });
    const page = await browser.newPage();
    const problems = watchProblems(page);
    try {
      await page.goto(`${url}/`);
      await page.getByLabel('Token', { exact: true }).fill(ADMIN);
      await page.getByRole('button', { name: 'Show the dashboard' }).click();
      await page.getByRole('button', { name: 'New tag' }).click();
      const dialog = page.getByRole('dialog', { name: 'New tag' });
      await dialog.getByLabel('Tag', { exact: true }).fill('made.in.page');
      // What the API itself says about a bad step: the page must show exactly this.
      const expected = async (method: string, path: string, payload: unknown) => {
        const answer = await server.app.inject({
          method: method as 'POST',
          url: path,
          payload: payload as Record<string, unknown>,
          headers: { authorization: `Bearer ${ADMIN}` },
        });
        assert.equal(answer.statusCode, 400);
        const { error } = answer.json() as { error: { code: string; message: string } };
        return `${error.code}: ${error.message}`;
      };
      for (const [step, sent] of [
        ['0', 0],
        ['ten', 'ten'],
        ['1.5', 1.5],
      ] as const) {
        await dialog.getByLabel('Step (IDs per range)').fill(step);
        await dialog.getByRole('button', { name: 'Create' }).click();
        const message = await expected('POST', '/v1/tags', { tag: 'made.in.page', step: sent });
        await dialog.getByRole('alert').filter({ hasText: message }).waitFor({ timeout: WAIT_MS });
        assert.match(message, /^INVALID_ARGUMENT: .*step/);
      }
      await dialog.getByLabel('Step (IDs per range)').fill('50');
      await dialog.getByLabel('Description (optional)').fill('made in the page');
      // TinyId's odd-only sequence, from the form.
      await dialog.getByLabel('Delta (every Nth ID; 1: every ID)').fill('2');
      await dialog.getByLabel('Remainder (IDs ≡ remainder mod delta)').fill('1');
      await dialog.getByRole('button', { name: 'Create' }).click();
      await dialog.waitFor({ state: 'detached', timeout: WAIT_MS });
      await page.locator('tr[data-tag="made.in.page"]').waitFor({ timeout: WAIT_MS });
      const client = new IdMintClient({ url, token: ADMIN, retries: 0 });
      const listed = await client.listTags();
      assert.deepEqual(
        listed.map((t) => [t.tag, t.step, t.description, t.delta, t.remainder]),
        [['made.in.page', 50, 'made in the page', 2, 1]],
      );

      // A duplicate is the server's 409, shown as it words it.
      await page.getByRole('button', { name: 'New tag' }).click();
      await dialog.getByLabel('Tag', { exact: true }).fill('made.in.page');
      await dialog.getByRole('button', { name: 'Create' }).click();
      await dialog
        .getByRole('alert')
        .filter({ hasText: /^TAG_EXISTS: / })
        .waitFor({ timeout: WAIT_MS });
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached', timeout: WAIT_MS });

      await page.getByRole('button', { name: 'Edit made.in.page' }).click();
      const edit = page.getByRole('dialog', { name: 'Edit made.in.page' });
      const step = edit.getByLabel('Step (IDs per range)');
      await step.and(page.locator(':enabled')).waitFor({ timeout: WAIT_MS });
      assert.equal(await step.inputValue(), '50', 'the form starts from the stored tag');
      await step.fill('-3');
      await edit.getByRole('button', { name: 'Save' }).click();
      const message = await expected('PATCH', '/v1/tags/made.in.page', { step: -3 });
      await edit.getByRole('alert').filter({ hasText: message }).waitFor({ timeout: WAIT_MS });
      await step.fill('75');
      await edit.getByRole('button', { name: 'Save' }).click();
      await edit.waitFor({ state: 'detached', timeout: WAIT_MS });
      assert.equal((await client.getTag('made.in.page')).step, 75);

      // The sequence from the edit form: the stored pair first, a bad one refused in the API's
      // words, then a new class.
      await page.getByRole('button', { name: 'Edit made.in.page' }).click();
      const remainder = edit.getByLabel('Remainder (IDs ≡ remainder mod delta)');
      await remainder.and(page.locator(':enabled')).waitFor({ timeout: WAIT_MS });
      assert.equal(await edit.getByLabel('Delta (every Nth ID; 1: every ID)').inputValue(), '2');
      assert.equal(await remainder.inputValue(), '1');
      await remainder.fill('2');
      await edit.getByRole('button', { name: 'Save' }).click();
      const bad = await expected('PATCH', '/v1/tags/made.in.page', { delta: 2, remainder: 2 });
      await edit.getByRole('alert').filter({ hasText: bad }).waitFor({ timeout: WAIT_MS });
      assert.match(bad, /^INVALID_ARGUMENT: .*remainder/);
      await edit.getByLabel('Delta (every Nth ID; 1: every ID)').fill('3');
      await edit.getByRole('button', { name: 'Save' }).click();
      await edit.waitFor({ state: 'detached', timeout: WAIT_MS });
      const changed = await client.getTag('made.in.page');
      assert.deepEqual([changed.step, changed.delta, changed.remainder], [75, 3, 2]);
      // The browser logs each refused call (400, 409) as a failed resource load: those were meant.
      assert.deepEqual(
        problems.errors.filter(
          (e) =>
            !/Failed to load resource: the server responded with a status of (400|409)/.test(e),
        ),
        [],
      );
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('creates a cluster-ordered tag from the dialog; its view says so', {
    timeout: 120_000,
  }, async () => {
    const { server, url } = await dashboardServer(assets, { auth: { adminToken: ADMIN } });
    const page = await browser.newPage();
    const problems = watchProblems(page);
    try {
      await page.goto(`${url}/`);
      await page.getByLabel('Token', { exact: true }).fill(ADMIN);
      await page.getByRole('button', { name: 'Show the dashboard' }).click();
      await page.getByRole('button', { name: 'New tag' }).click();
      const dialog = page.getByRole('dialog', { name: 'New tag' });
      await dialog.getByLabel('Tag', { exact: true }).fill('ordered.in.page');
      await dialog.getByLabel('Step (IDs per range)').fill('20');
      await dialog.getByLabel('Cluster order (one node at a time issues it)').check();
      await dialog.getByRole('button', { name: 'Create' }).click();
      await dialog.waitFor({ state: 'detached', timeout: WAIT_MS });
      await page.locator('tr[data-tag="ordered.in.page"]').waitFor({ timeout: WAIT_MS });
      const client = new IdMintClient({ url, token: ADMIN, retries: 0 });
      assert.equal((await client.getTag('ordered.in.page')).ordering, 'cluster');
      // Once drawn from, this node holds the tag's issuer lease: its row says who issues it.
      await client.segment('ordered.in.page');
      // (The page may show it before the draw, with no issuer known yet; it refreshes.)
      await page
        .locator('tr[data-tag="ordered.in.page"] [data-testid="tag-issuer"]')
        .filter({ hasText: /^Cluster order: issued here$/ })
        .waitFor({ timeout: WAIT_MS });
      // The tag's own view says so; a plain tag's does not.
      await page.getByRole('button', { name: 'Edit ordered.in.page' }).click();
      const edit = page.getByRole('dialog', { name: 'Edit ordered.in.page' });
      await edit.getByTestId('tag-ordering').waitFor({ timeout: WAIT_MS });
      assert.match(
        (await edit.getByTestId('tag-ordering').textContent()) ?? '',
        /Cluster order: one node at a time issues this tag/,
      );
      await page.keyboard.press('Escape');
      await edit.waitFor({ state: 'detached', timeout: WAIT_MS });
      await client.createTag({ tag: 'plain.in.page', step: 20 });
      await page.locator('tr[data-tag="plain.in.page"]').waitFor({ timeout: WAIT_MS });
      assert.equal(
        await page.locator('tr[data-tag="plain.in.page"] [data-testid="tag-issuer"]').count(),
        0,
      );
      await page.getByRole('button', { name: 'Edit plain.in.page' }).click();
      const plain = page.getByRole('dialog', { name: 'Edit plain.in.page' });
      const step = plain.getByLabel('Step (IDs per range)');
      await step.and(page.locator(':enabled')).waitFor({ timeout: WAIT_MS });
      assert.equal(await plain.getByTestId('tag-ordering').count(), 0);
      await page.keyboard.press('Escape');
      await plain.waitFor({ state: 'detached', timeout: WAIT_MS });

      // A refused create with the box ticked is the server's error, as it words it.
      await page.getByRole('button', { name: 'New tag' }).click();
      await dialog.getByLabel('Tag', { exact: true }).fill('ordered.in.page');
      await dialog.getByLabel('Cluster order (one node at a time issues it)').check();
      await dialog.getByRole('button', { name: 'Create' }).click();
      await dialog
        .getByRole('alert')
        .filter({ hasText: /^TAG_EXISTS: / })
        .waitFor({ timeout: WAIT_MS });
      assert.deepEqual(
        problems.errors.filter(
          (e) => !/Failed to load resource: the server responded with a status of 409/.test(e),
        ),
        [],
      );
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('auth on: no data without a token, a limited token sees its tags', {
    timeout: 120_000,
  }, async () => {
    const { server, url } = await dashboardServer(assets, {
      auth: { adminToken: ADMIN, tokens: [`${PUBLIC}:public.*`] },
    });
    const admin = new IdMintClient({ url, token: ADMIN, retries: 0 });
    const page = await browser.newPage();
    const problems = watchProblems(page);
    const statusCalls: number[] = [];
    page.on('response', (response) => {
      if (new URL(response.url()).pathname === '/v1/status') statusCalls.push(response.status());
    });
    try {
      await admin.createTag({ tag: 'secret.alpha', step: 10 });
      await admin.createTag({ tag: 'public.beta', step: 10 });
      await page.goto(`${url}/dashboard`);
      await page
        .getByRole('heading', { name: 'This server needs a token' })
        .waitFor({ timeout: WAIT_MS });
      // biome-ignore lint/performance/useDomNodeTextContent: what is shown, not hidden text
      const shown = async () => (await page.locator('body').innerText()).toLowerCase();
      for (const secret of [
        'secret.alpha',
        'public.beta',
        'snowflake',
        'worker',
        'static',
        'sqlite',
      ])
        assert.ok(!(await shown()).includes(secret), `"${secret}" is on the page without a token`);
      assert.equal(statusCalls.length, 0, 'no status is even asked for without a token');

      // A wrong token: the server's refusal, still nothing else.
      await page.getByLabel('Token', { exact: true }).fill('wrong-token-0123456789');
      await page.getByRole('button', { name: 'Show the dashboard' }).click();
      await page
        .getByRole('alert')
        .filter({ hasText: 'UNAUTHORIZED: the bearer token is not valid on this server' })
        .waitFor({ timeout: WAIT_MS });
      for (const secret of ['secret.alpha', 'public.beta'])
        assert.ok(!(await shown()).includes(secret));

      await page.getByLabel('Token', { exact: true }).fill(PUBLIC);
      await page.getByRole('button', { name: 'Show the dashboard' }).click();
      await page.locator('tr[data-tag="public.beta"]').waitFor({ timeout: WAIT_MS });
      assert.equal(await page.locator('tr[data-tag]').count(), 1);
      assert.ok(!(await shown()).includes('secret.alpha'));
      assert.equal(
        await page.getByRole('button', { name: 'New tag' }).count(),
        0,
        'no admin action for a non-admin token',
      );
      assert.equal(await page.getByRole('button', { name: /^Edit / }).count(), 0);
      assert.deepEqual(
        problems.errors.filter(
          (e) => !/Failed to load resource: the server responded with a status of 401/.test(e),
        ),
        [],
      );
      assert.ok(statusCalls.includes(401) && statusCalls.at(-1) === 200);
    } finally {
      await page.close();
      await server.close();
    }
  });
});
