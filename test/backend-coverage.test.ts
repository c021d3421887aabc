// Every backend the catalog lists runs through its port's conformance suite: a backend added to
// src/backends/catalog.ts without a fixture or a suite file fails here, before it ships untested
// (issue 22: the conformance suites run against the catalog's backends).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { it } from 'node:test';
import { BACKENDS } from '../src/backends/catalog.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';

/** The store fixture that runs a catalog kind, where the names differ (MariaDB speaks mysql:). */
const STORE_FIXTURE_OF: Readonly<Record<string, string>> = { mysql: 'mariadb' };

it('every catalog backend that stores segments has a store conformance fixture', () => {
  const fixtures = new Set(Object.values(SEGMENT_BACKENDS).map((backend) => backend.name));
  const stores = BACKENDS.filter((backend) => backend.roles.includes('segment-store'));
  assert.ok(stores.length >= 4, `only ${stores.length} segment-store backends in the catalog`);
  for (const backend of stores) {
    const fixture = STORE_FIXTURE_OF[backend.kind] ?? backend.kind;
    assert.ok(fixtures.has(fixture), `no segment-store fixture "${fixture}" for ${backend.kind}`);
  }
});

it('every segment-store fixture runs the issuer lease conformance suite, and so does a set', () => {
  // Cluster-ordered tags keep their issuer lease in the tag's own store (issue 24): a store
  // fixture the lease suite skipped would ship a lease nobody tested.
  const suite = readFileSync(new URL('./issuer-leases.test.ts', import.meta.url), 'utf8');
  assert.match(suite, /for \(const backend of Object\.values\(SEGMENT_BACKENDS\)\) \{\n/);
  assert.doesNotMatch(suite, /continue;/, 'the issuer lease suite passes over a backend');
  assert.match(suite, /runIssuerLeaseSuite\(/);
  assert.match(suite, /openSegmentStores\(/, 'no set runs the issuer lease suite');
});

it('every catalog backend that registers workers runs the registry conformance suite', () => {
  const dir = new URL('./registries/', import.meta.url);
  const files = readdirSync(dir);
  const registries = BACKENDS.filter((backend) => backend.roles.includes('worker-registry'));
  assert.ok(registries.length >= 6, `only ${registries.length} registry backends in the catalog`);
  for (const backend of registries) {
    const file = `${backend.kind}-worker-registry.test.ts`;
    assert.ok(files.includes(file), `no test/registries/${file} for ${backend.kind}`);
    // The static registry is a file on this host: its own tests cover its locks and state file.
    if (backend.kind === 'static') continue;
    assert.match(readFileSync(new URL(file, dir), 'utf8'), /runWorkerRegistrySuite\(/, file);
  }
});
