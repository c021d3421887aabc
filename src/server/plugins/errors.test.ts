import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdMintError } from '../../core/errors.ts';
import { toIdMintError } from './errors.ts';

/** An error shaped like the ones Fastify raises. */
function fastifyError(code: string, statusCode: number, message = code, extra: Record<string, unknown> = {}): Error {
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
      [fastifyError('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415), 'UNSUPPORTED_MEDIA_TYPE', 415, /application\/json/],
      [fastifyError('FST_ERR_CTP_INVALID_JSON_BODY', 400), 'INVALID_ARGUMENT', 400, /not valid JSON/],
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
      [fastifyError('FST_ERR_BAD_URL', 400, "'/%' is not a valid url component"), 'INVALID_ARGUMENT', 400, /not a valid url/],
      [Object.assign(new SyntaxError('Unexpected end of JSON input'), { statusCode: 400 }), 'INVALID_ARGUMENT', 400, /^request body is not valid JSON: Unexpected end/],
    ];
    for (const [error, code, status, message] of cases) {
      const mapped = toIdMintError(error);
      assert.equal(mapped.code, code, error.message);
      assert.equal(mapped.status, status);
      assert.match(mapped.message, message);
      assert.equal(mapped.cause, error);
    }
  });

  it('turns anything else into INTERNAL_ERROR, keeping the cause for the log and out of the answer', () => {
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
