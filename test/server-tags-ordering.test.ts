// The `ordering` option of a tag over HTTP (issue 24: cluster-ordered tags): created with
// `POST /v1/tags`, shown by every tag route, never changed, and refused with what cannot keep the
// order (opaque and periodic tags), for what it is.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

const K1 = '2b7e151628aed2a6abf7158809cf4f3c';
type Server = Awaited<ReturnType<typeof testServer>>;

function send(server: Server, method: 'POST' | 'PATCH', url: string, payload: unknown) {
  return server.app.inject({ method, url, payload: payload as Record<string, unknown> });
}

/** The error's message, after checking its status and code. */
function refused(
  answer: Awaited<ReturnType<typeof send>>,
  status: number,
  code: string,
  pattern: RegExp,
): void {
  assertError(answer, status, code);
  const { error } = answer.json() as { error: { message: string } };
  assert.match(error.message, pattern);
}

describe('cluster-ordered tags over HTTP', () => {
  it('POST /v1/tags creates one; every tag route shows its ordering', async () => {
    const server = await testServer();
    try {
      const created = await send(server, 'POST', '/v1/tags', {
        tag: 'invoices',
        step: 100,
        ordering: 'cluster',
      });
      assert.equal(created.statusCode, 201, created.body);
      assert.equal((created.json() as { ordering?: string }).ordering, 'cluster');
      const plain = await send(server, 'POST', '/v1/tags', { tag: 'plain', step: 100 });
      assert.equal(plain.statusCode, 201, plain.body);
      assert.equal('ordering' in (plain.json() as object), false, 'a plain tag has no ordering');
      const one = (await server.app.inject('/v1/tags/invoices')).json() as { ordering?: string };
      assert.equal(one.ordering, 'cluster');
      const { tags } = (await server.app.inject('/v1/tags')).json() as {
        tags: { tag: string; ordering?: string }[];
      };
      assert.deepEqual(
        tags.map((tag) => [tag.tag, tag.ordering ?? null]),
        [
          ['invoices', 'cluster'],
          ['plain', null],
        ],
      );
      // Other changes keep it.
      const changed = await send(server, 'PATCH', '/v1/tags/invoices', { step: 200 });
      assert.equal(changed.statusCode, 200, changed.body);
      assert.equal((changed.json() as { ordering?: string }).ordering, 'cluster');
    } finally {
      await server.close();
    }
  });

  it('refuses an unknown ordering, and a change of ordering after creation', async () => {
    const server = await testServer();
    try {
      const odd = await send(server, 'POST', '/v1/tags', {
        tag: 'odd',
        step: 10,
        ordering: 'global',
      });
      refused(odd, 400, 'INVALID_ARGUMENT', /ordering/);
      await send(server, 'POST', '/v1/tags', { tag: 'plain', step: 10 });
      const later = await send(server, 'PATCH', '/v1/tags/plain', { ordering: 'cluster' });
      refused(later, 400, 'INVALID_ARGUMENT', /ordering/);
    } finally {
      await server.close();
    }
  });

  it('refuses opaque + cluster at creation, with or without opaque keys, naming why', async () => {
    for (const values of [{}, { opaque: { keys: `1:${K1}` } }]) {
      const server = await testServer(values);
      try {
        const answer = await send(server, 'POST', '/v1/tags', {
          tag: 'secret',
          step: 10,
          ordering: 'cluster',
          opaque: true,
        });
        refused(answer, 400, 'INVALID_ARGUMENT', /opaque and cluster-ordered.*no order/);
        assert.equal((await server.app.inject('/v1/tags/secret')).statusCode, 404);
      } finally {
        await server.close();
      }
    }
  });

  it('refuses periodic + cluster, naming why', async () => {
    const server = await testServer();
    try {
      const answer = await send(server, 'POST', '/v1/tags', {
        tag: 'daily',
        step: 10,
        ordering: 'cluster',
        periodic: { period: 'day', timeZone: 'UTC', template: '{yyyyMMdd}{seq:6}' },
      });
      refused(answer, 400, 'INVALID_ARGUMENT', /periodic and cluster-ordered/);
    } finally {
      await server.close();
    }
  });

  it('refuses marking a cluster-ordered tag opaque later; the tag stays plain', async () => {
    for (const values of [{}, { opaque: { keys: `1:${K1}` } }]) {
      const server = await testServer(values);
      try {
        await send(server, 'POST', '/v1/tags', { tag: 'invoices', step: 10, ordering: 'cluster' });
        const answer = await send(server, 'PATCH', '/v1/tags/invoices', { opaque: true });
        refused(answer, 400, 'INVALID_ARGUMENT', /opaque and cluster-ordered/);
        const tag = (await server.app.inject('/v1/tags/invoices')).json() as { opaque: boolean };
        assert.equal(tag.opaque, false);
      } finally {
        await server.close();
      }
    }
  });
});
