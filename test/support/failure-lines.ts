// The form every backend failure is told in (issue 23.4): one line, `<backend> <role> at
// <address>[, <operation in words>]: <cause>`, without a driver's words or a method's name.
import assert from 'node:assert/strict';

/**
 * What a line must never carry: drivers' words for a failure, idmint's old "<method> failed" and
 * "cannot be reached" wording, and store methods' names.
 */
export const NOT_IN_A_LINE = new RegExp(
  [
    'circuit breaker',
    "Stream isn't writeable",
    'max retries',
    'enableOfflineQueue',
    'Connection terminated',
    'Connection is closed',
    'CONNECTION_LOSS',
    'PROTOCOL_CONNECTION_LOST',
    '\\d+ UNAVAILABLE',
    'DEADLINE_EXCEEDED',
    'Command timed out',
    'cannot be reached',
    'failed:',
    '\\b(?:allocate|listTags|listTagChanges|listTagPage|getTag|createTag|updateTag|deleteTag)\\b',
    '\\b(?:readSetEntries|writeSetEntry)\\b',
  ].join('|'),
);

/** Asserts `message` is one line: `prefix`, then a cause `cause` accepts, nothing else. */
export function assertLine(message: string, prefix: string, cause: RegExp): void {
  assert.ok(!message.includes('\n'), `more than one line: ${message}`);
  assert.ok(message.startsWith(prefix), `expected "${prefix}...", got: ${message}`);
  assert.match(message.slice(prefix.length), cause, message);
  assert.doesNotMatch(message, NOT_IN_A_LINE, message);
}
