import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { REQUIRE_SERVICES } from './services.ts';

/**
 * Debian's chromium (scripts/services.sh up installs it), driven by playwright-core. Playwright's
 * own browser downloads cannot work here; IDMINT_TEST_CHROMIUM names another binary.
 */
export const CHROMIUM =
  process.env['IDMINT_TEST_CHROMIUM'] ??
  ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path)) ??
  '/usr/bin/chromium';

/**
 * What this machine needs (no sandbox as root, no GPU, no network beyond loopback: no QUIC, no
 * background fetches, component updates or sync). Playwright adds --headless and a fresh
 * --user-data-dir of its own for every launch.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const MISSING =
  `chromium not found at ${CHROMIUM} (apt-get install chromium, or scripts/services.sh up ` +
  `chromium; IDMINT_TEST_CHROMIUM names another)`;

/**
 * Why browser tests cannot run, or undefined when they can. With IDMINT_REQUIRE_SERVICES=1 a
 * missing browser throws (the suite fails, as for a missing database); otherwise a loud line.
 */
export function browserSkipReason(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  if (REQUIRE_SERVICES) throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${MISSING}`);
  process.stderr.write(`\n!!! SKIPPING browser tests: ${MISSING}\n`);
  return MISSING;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 60_000,
  });
}

/** What went wrong in a page: console errors and warnings, uncaught exceptions, failed requests. */
export interface PageProblems {
  readonly errors: string[];
}

/** Records every console error, page error and failed request of `page` from now on. */
export function watchProblems(page: Page): PageProblems {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning')
      errors.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => {
    // A poll cut short by the page itself (a new query) is no failure.
    if (request.failure()?.errorText !== 'net::ERR_ABORTED')
      errors.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`);
  });
  return { errors };
}
