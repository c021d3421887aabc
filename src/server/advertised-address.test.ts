// The URL other nodes forward a cluster-ordered tag's requests to.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { defineConfig } from '../config/load.ts';
import { isIdMintError } from '../core/errors.ts';
import { advertisedAddress } from './advertised-address.ts';

const config = (host: string, advertiseUrl = '') => ({ host, segment: { advertiseUrl } });

it('is the listen address with the bound port, or segment.advertiseUrl', () => {
  assert.deepEqual(advertisedAddress(config('127.0.0.1'), 41234), {
    address: 'http://127.0.0.1:41234',
  });
  assert.deepEqual(advertisedAddress(config('fe80::1'), 80), { address: 'http://[fe80::1]:80' });
  assert.deepEqual(advertisedAddress(config('0.0.0.0', 'http://node-3.internal:8080/'), 8080), {
    address: 'http://node-3.internal:8080',
  });
  // One of `serve --processes N`: the URL's host, this process's own port.
  assert.deepEqual(
    advertisedAddress(config('0.0.0.0', 'http://node-3.internal:8080'), 40001, true),
    { address: 'http://node-3.internal:40001' },
  );
  assert.deepEqual(advertisedAddress(config('127.0.0.1'), 40001, true), {
    address: 'http://127.0.0.1:40001',
  });
});

it('names no address for a wildcard host, and says why', () => {
  for (const host of ['0.0.0.0', '::']) {
    const advertised = advertisedAddress(config(host), 8080);
    assert.equal(advertised.address, '');
    assert.match(advertised.why ?? '', new RegExp(`wildcard address ${host.replace('.', '\\.')}`));
  }
});

it('refuses a wildcard or port-0 segment.advertiseUrl at start-up', () => {
  for (const url of ['http://0.0.0.0:8080', 'http://[::]:8080', 'http://node:0', 'node:8080']) {
    assert.throws(
      () => defineConfig({ segment: { advertiseUrl: url } }),
      (error) =>
        isIdMintError(error, 'CONFIG_INVALID') && /segment\.advertiseUrl/.test(error.message),
      url,
    );
  }
  assert.equal(
    defineConfig({ segment: { advertiseUrl: 'https://ids.example:443' } }).segment.advertiseUrl,
    'https://ids.example:443',
  );
});
