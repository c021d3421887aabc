import { Compile } from 'typebox/compile';
import { readTokenList } from './auth.ts';
import { PART, type KeySchema, type PartInfo, type TextForm } from './keys.ts';

/**
 * Reading one key's value: text (env vars, flags) or a file's value becomes a candidate through
 * the key's text form, and the key's TypeBox schema judges it. A value that fails gets one phrase
 * saying what is wrong, from the schema: the key's `allowed`, or the part of a compound key that
 * failed (a token, a tag).
 */

/** `true`/`1`/`yes`/`on` and their opposites, any case; undefined for anything else. */
export function parseOnOff(raw: unknown): boolean | undefined {
  if (typeof raw === 'boolean') return raw;
  const value = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  return ['true', '1', 'yes', 'on'].includes(value)
    ? true
    : ['false', '0', 'no', 'off'].includes(value)
      ? false
      : undefined;
}

/**
 * A raw value as the key's type, when its text form can read it; otherwise the raw value itself,
 * for the schema to refuse. Numbers from text are plain decimal only, so `1e3` or `0x10` is not
 * silently a different number.
 */
export function readValue(form: TextForm, raw: unknown): unknown {
  if (form === 'token-list') return readTokenList(raw);
  if (form === 'url-list')
    return typeof raw === 'string'
      ? raw
          .split(',')
          .map((url) => url.trim())
          .filter((url) => url !== '')
      : raw;
  if (typeof raw !== 'string') return raw;
  const text = raw.trim();
  switch (form) {
    case 'integer':
      return /^[0-9]{1,16}$/.test(text) ? Number(text) : raw;
    case 'decimal':
      return /^(?:[0-9]{1,16}(?:\.[0-9]{1,16})?|\.[0-9]{1,16})$/.test(text) ? Number(text) : raw;
    case 'on-off':
      return parseOnOff(text) ?? raw;
    case 'trimmed':
      return text;
  }
}

/** A compiled key: its schema and the validator TypeBox built from it. */
export interface CheckedKey {
  readonly schema: KeySchema;
  readonly validator: ReturnType<typeof Compile>;
}

/** Compiles a key's schema into a validator (TypeBox's JIT compiler). */
export function compileKey(schema: KeySchema): CheckedKey {
  return { schema, validator: Compile(schema) };
}

/** Undefined when `value` passes the key's schema; otherwise what is wrong, in words. */
export function problemWith(key: CheckedKey, value: unknown): string | undefined {
  if (key.validator.Check(value)) return undefined;
  const errors = key.validator.Errors(value);
  // The deepest failure names the most specific part (a tag in a token's list, not the list).
  const depth = (path: string) => (path === '' ? 0 : path.split('/').length);
  const deepest = [...errors].sort((a, b) => depth(b.instancePath) - depth(a.instancePath))[0];
  if (deepest !== undefined && deepest.instancePath !== '') {
    const specific = partProblem(key.schema, value, deepest);
    if (specific !== undefined) return specific;
  }
  return `must be ${key.schema['x-idmint'].allowed}`;
}

interface SchemaError {
  readonly keyword: string;
  readonly schemaPath: string;
  readonly instancePath: string;
  readonly params: unknown;
}

/** The message of the part of a compound key where `error` is, if that part says one. */
function partProblem(schema: KeySchema, value: unknown, error: SchemaError): string | undefined {
  const pointer = error.schemaPath
    .replace(/^#\/?/, '')
    .split('/')
    .filter((s) => s !== '');
  const instance = error.instancePath.split('/').slice(1);
  // An unknown field: TypeBox reports it at the object's `additionalProperties` (as `false`).
  if (pointer.at(-1) === 'additionalProperties' || error.keyword === 'additionalProperties') {
    const objectPath = pointer.at(-1) === 'additionalProperties' ? pointer.slice(0, -1) : pointer;
    const object = at(schema, objectPath) as { properties?: object; [PART]?: PartInfo } | undefined;
    const listed = (error.params as { additionalProperties?: string[] })?.additionalProperties?.[0];
    const field = listed ?? instance.at(-1) ?? '?';
    const where = object?.[PART]?.name ?? 'an entry';
    return (
      `unknown field "${field}" in ${where} (allowed: ` +
      `${Object.keys(object?.properties ?? {}).join(', ')})`
    );
  }
  // The nearest enclosing part with a message of its own.
  for (let n = pointer.length; n >= 0; n--) {
    const node = at(schema, pointer.slice(0, n)) as { [PART]?: PartInfo } | undefined;
    const problem = node?.[PART]?.problem;
    if (problem !== undefined) {
      const offending = instance.reduce<unknown>(
        (v, step) =>
          v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[step] : undefined,
        value,
      );
      return problem.replace('%s', JSON.stringify(offending) ?? String(offending));
    }
  }
  return undefined;
}

/** The node of `root` a JSON-pointer path leads to. */
function at(root: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>(
    (node, step) =>
      node !== null && typeof node === 'object'
        ? (node as Record<string, unknown>)[step]
        : undefined,
    root,
  );
}
