import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { assertError } from '../../../test/support/http.ts';
import { ERROR_CODES, IdMintError } from '../../core/errors.ts';
import { installErrorHandling, publicMessage, toIdMintError } from './errors.ts';

/** An error shaped like the ones Fastify raises. */
function fastifyError(
  code: string,
  statusCode: number,
  message = code,
  extra: Record<string, unknown> = {},
): Error {
  return Object.assign(new Error(message), { code, statusCode, ...extra });
}

describe('toIdMintError', () => {
  it('passes IdMintErrors through untouched', () => {
    const error = new IdMintError('TAG_NOT_FOUND', 'tag "x" does not exist');
    assert.equal(toIdMintError(error), error);
  });

  it('maps Fastify body and validation errors to codes with the right status', () => {
    const cases: [Error, string, number, RegExp][] = [
      [fastifyError('FST_ERR_CTP_BODY_TOO_LARGE', 413), 'PAYLOAD_TOO_LARGE', 413, /bodyLimit/],
      [
        fastifyError('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415),
        'UNSUPPORTED_MEDIA_TYPE',
        415,
        /application\/json \(Content-Type was none\)$/,
      ],
      [
        fastifyError('FST_ERR_CTP_INVALID_JSON_BODY', 400),
        'INVALID_ARGUMENT',
        400,
        /not valid JSON/,
      ],
      [fastifyError('FST_ERR_CTP_EMPTY_JSON_BODY', 400), 'INVALID_ARGUMENT', 400, /empty/],
      [
        fastifyError('FST_ERR_VALIDATION', 400, 'body/step must be integer', {
          validation: [{ instancePath: '/step', keyword: 'type', message: 'must be integer' }],
          validationContext: 'body',
        }),
        'INVALID_ARGUMENT',
        400,
        /^body\.step must be integer$/,
      ],
      [
        fastifyError('FST_ERR_BAD_URL', 400, "'/%' is not a valid url component"),
        'INVALID_ARGUMENT',
        400,
        /not a valid url/,
      ],
      [
        Object.assign(new SyntaxError('Unexpected end of JSON input'), { statusCode: 400 }),
        'INVALID_ARGUMENT',
        400,
        /^request body is not valid JSON: Unexpected end/,
      ],
    ];
    for (const [error, code, status, message] of cases) {
      const mapped = toIdMintError(error);
      assert.equal(mapped.code, code, error.message);
      assert.equal(mapped.status, status);
      assert.match(mapped.message, message);
      assert.equal(mapped.cause, error);
    }
  });

  it('turns anything else into INTERNAL_ERROR, its cause logged, not answered', () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    const mapped = toIdMintError(bug);
    assert.equal(mapped.code, 'INTERNAL_ERROR');
    assert.equal(mapped.status, 500);
    assert.equal(mapped.retryable, false);
    assert.doesNotMatch(mapped.message, /Cannot read/);
    assert.equal(mapped.cause, bug);
    assert.equal(toIdMintError('a string').code, 'INTERNAL_ERROR');
    assert.equal(toIdMintError(fastifyError('FST_SOMETHING', 500)).code, 'INTERNAL_ERROR');
  });
});

describe('error answers and the log (installErrorHandling)', () => {
  /** A Fastify app with idmint's error handling, a route that throws `error`, and its log lines. */
  async function appThrowing(error: Error) {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const app = Fastify();
    installErrorHandling(app as unknown as FastifyInstance, pino(stream));
    app.get('/fail', () => {
      throw error;
    });
    await app.ready();
    return { app, lines };
  }

  it('a 5xx answers code, fixed sentence, request id; the log has the detail', async () => {
    // What a store raises when PostgreSQL fails: its message carries the statement and the address.
    const driver = Object.assign(new Error('connect ETIMEDOUT 10.0.3.7:5432'), {
      code: 'ETIMEDOUT',
      address: '10.0.3.7',
      port: 5432,
    });
    const failure = new IdMintError(
      'STORE_UNAVAILABLE',
      'postgres store: allocate failed: UPDATE idmint_alloc SET max_id = max_id + step ' +
        'WHERE biz_tag = $1: connect ETIMEDOUT 10.0.3.7:5432',
      { cause: driver },
    );
    const { app, lines } = await appThrowing(failure);
    try {
      const response = await app.inject('/fail');
      const message = assertError(
        { statusCode: response.statusCode, headers: response.headers, body: response.body },
        503,
        'STORE_UNAVAILABLE',
      );
      const requestId = /\(request (req-\w+); the server log has the details\)$/.exec(message)?.[1];
      assert.ok(requestId !== undefined, message);
      assert.equal(
        message,
        `the segment store is unavailable; retry (request ${requestId}; the server log has ` +
          `the details)`,
      );
      for (const secret of [
        'UPDATE',
        'idmint_alloc',
        'biz_tag',
        '10.0.3.7',
        '5432',
        'ETIMEDOUT',
        'postgres',
      ]) {
        assert.equal(
          response.body.includes(secret),
          false,
          `the answer reveals ${secret}: ${response.body}`,
        );
      }
      const line = lines.find((entry) => entry['reqId'] === requestId);
      assert.ok(line !== undefined, JSON.stringify(lines));
      assert.equal(line['level'], 50);
      assert.equal(line['code'], 'STORE_UNAVAILABLE');
      const logged = line['err'] as { message: string; stack: string };
      assert.match(logged.message, /UPDATE idmint_alloc SET max_id/);
      assert.match(logged.message, /10\.0\.3\.7:5432/);
      // The line is the failure's own: its message says the cause; the driver's words, which
      // pino would append, are left out.
      assert.doesNotMatch(logged.stack, /caused by/);
    } finally {
      await app.close();
    }
  });

  it('in a burst, one log line per code; its answers name their request', async () => {
    const { app, lines } = await appThrowing(
      new IdMintError(
        'REGISTRY_UNAVAILABLE',
        'etcd worker registry at 10.0.4.4:2379 cannot be reached',
      ),
    );
    try {
      const messages = [];
      for (let i = 0; i < 3; i++)
        messages.push(JSON.parse((await app.inject('/fail')).body).error.message as string);
      assert.equal(lines.length, 1);
      const first = String(lines[0]?.['reqId']);
      assert.equal(
        messages[0],
        `the worker registry is unavailable; retry (request ${first}; the server log has ` +
          `the details)`,
      );
      for (const message of messages.slice(1)) {
        assert.match(
          message,
          new RegExp(
            `^the worker registry is unavailable; retry \\(request req-\\w+; the server log ` +
              `has the details under request ${first}\\)$`,
          ),
        );
      }
    } finally {
      await app.close();
    }
  });

  it('a bug is INTERNAL_ERROR with the same answer; the log has its stack', async () => {
    const { app, lines } = await appThrowing(
      new TypeError('cannot read "host" of undefined at 10.1.1.1'),
    );
    try {
      const response = await app.inject('/fail');
      assert.match(
        assertError(
          { statusCode: response.statusCode, headers: response.headers, body: response.body },
          500,
          'INTERNAL_ERROR',
        ),
        /^internal error \(request req-\w+; the server log has the details\)$/,
      );
      assert.equal(response.body.includes('10.1.1.1'), false);
      assert.match(
        String((lines[0]?.['err'] as { stack?: string } | undefined)?.stack),
        /TypeError: cannot read "host" of undefined at 10\.1\.1\.1/,
      );
    } finally {
      await app.close();
    }
  });

  it('a 4xx keeps its own message and is not logged', async () => {
    const { app, lines } = await appThrowing(
      new IdMintError('TAG_NOT_FOUND', 'tag "order" does not exist'),
    );
    try {
      const response = await app.inject('/fail');
      assert.equal(
        assertError(
          { statusCode: response.statusCode, headers: response.headers, body: response.body },
          404,
          'TAG_NOT_FOUND',
        ),
        'tag "order" does not exist',
      );
      assert.deepEqual(lines, []);
    } finally {
      await app.close();
    }
  });

  it('every 5xx code has its own public sentence', () => {
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      if (info.status < 500) continue;
      const sentence = publicMessage(
        new IdMintError(code as keyof typeof ERROR_CODES, 'detail: 10.0.0.1'),
        'req-1',
      );
      assert.doesNotMatch(sentence, /^the server failed|10\.0\.0\.1/, code);
    }
  });
});
