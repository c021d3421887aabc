// The issuer lease's keys: every TTL the configuration accepts is one the service accepts, so a
// value that passes `config check` never fails at start-up.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_SAFETY_MARGIN_MS, leaseRenewIntervalMs } from '../core/lease-policy.ts';
import { isIdMintError } from '../core/errors.ts';
import { configKeys } from './schema.ts';
import { defineConfig } from './load.ts';

it('segment.issuerTtlMs accepts only TTLs that hold the margin and two renewals', () => {
  const key = configKeys().find((k) => k.key === 'segment.issuerTtlMs');
  const minimum = (key?.schema as { minimum?: number } | undefined)?.minimum;
  assert.equal(typeof minimum, 'number');
  const min = minimum as number;
  // What IssuerDirectory computes at start-up: it throws for a TTL too short.
  assert.ok(leaseRenewIntervalMs(min, { safetyMarginMs: DEFAULT_SAFETY_MARGIN_MS }) >= 1);
  assert.equal(defineConfig({ segment: { issuerTtlMs: min } }).segment.issuerTtlMs, min);
  assert.throws(
    () => defineConfig({ segment: { issuerTtlMs: min - 1 } }),
    (error) => isIdMintError(error, 'CONFIG_INVALID'),
  );
});
