import assert from 'node:assert/strict';

/**
 * The parts of an HTTP answer the assertions below look at (an inject response or a fetch result).
 */
export interface Answer {
  readonly statusCode: number;
  readonly headers: Record<string, unknown>;
  readonly body: string;
}

/**
 * Asserts an idmint error answer: the status, JSON content type, exactly `{ error: { code,
 * message } }`, the code, and Retry-After exactly when the code is retryable. Returns the message.
 */
export function assertError(
  answer: Answer,
  status: number,
  code: string,
  retryable = status === 503 && code !== 'ID_SPACE_EXHAUSTED' && code !== 'TIME_OVERFLOW',
): string {
  assert.equal(answer.statusCode, status, `status of ${answer.body}`);
  assert.match(String(answer.headers['content-type']), /^application\/json/);
  const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message']);
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  if (retryable)
    assert.match(String(answer.headers['retry-after']), /^[1-9][0-9]*$/, 'Retry-After');
  else
    assert.equal(
      answer.headers['retry-after'],
      undefined,
      'no Retry-After for a non-retryable error',
    );
  return body.error.message;
}
