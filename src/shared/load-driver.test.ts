import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import { loadDriver } from './load-driver.ts';

it('a driver that is not installed is DRIVER_MISSING naming the package to install', async () => {
  const pkg = 'idmint-test-no-such-driver';
  const error = await loadDriver(pkg, 'a test:// URL', () => import(pkg)).then(
    () => assert.fail('resolved'),
    (caught: unknown) => caught,
  );
  assert.ok(isIdMintError(error, 'DRIVER_MISSING'), String(error));
  assert.equal(
    error.message,
    `a test:// URL needs the npm package "${pkg}", which is not installed: run npm install ${pkg}`,
  );
  assert.equal(error.details?.['package'], pkg);
});

it('loads an installed driver; a failure inside it is not "missing"', async () => {
  const yaml = await loadDriver('yaml', 'a test', () => import('yaml'));
  assert.equal(typeof yaml.parse, 'function');
  const inner = Object.assign(
    new Error("Cannot find package 'left-pad' imported from /x/node_modules/pg/lib/index.js"),
    { code: 'ERR_MODULE_NOT_FOUND' },
  );
  await assert.rejects(
    loadDriver('pg', 'a test', () => Promise.reject(inner)),
    (error) => error === inner,
  );
});
