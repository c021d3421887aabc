import type { FastifyInstance } from 'fastify';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { AnswerOf, RouteContract, RouteTypes } from '../../contract/route.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import { routeOptions, type ContractHandler } from './from-contract.ts';

/** Content type of Leaf-compatible single-ID answers. */
export const TEXT_TYPE = 'text/plain; charset=utf-8';

/**
 * `{<head>"ids":["1","2",...]}` built as one string: the IDs are decimal strings (they exceed
 * 2^53) and nothing in them needs escaping, so joining is exact and several times faster than a
 * generic serializer on 10,000-element arrays. `head` is the opening brace and any fields before
 * `ids`, ending in a comma.
 */
export function idsJson(head: string, ids: readonly (bigint | string)[]): string {
  return ids.length === 0 ? `${head}"ids":[]}` : `${head}"ids":["${ids.join('","')}"]}`;
}

/**
 * The methods Leaf's ID routes answer. LeafController's `@RequestMapping` names no method, so
 * Spring maps every one to it (a HEAD draws an ID and sends no body there too); OPTIONS Spring
 * answers itself with the allowed methods (see {@link leafRoute}).
 */
export const LEAF_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * What `OPTIONS` on a Leaf route answers in `Allow`, without drawing an ID (Spring's answer for
 * such a mapping).
 */
export const LEAF_ALLOW = [...LEAF_METHODS, 'OPTIONS'].join(', ');

/** How a Leaf route reads bodies. */
export interface LeafRouteOptions {
  /**
   * Keep an `application/x-www-form-urlencoded` body as its text (`request.body`), for a mapping
   * that binds a `@RequestParam`, which Spring reads from a form body too. Other bodies are
   * ignored either way.
   */
  readonly form?: boolean;
}

/**
 * A Leaf-compatible route, registered (`leafRoute(app, CONTRACT).handle(handler)`, as
 * contractRoute) the way Leaf's Spring mappings answer: every method in
 * {@link LEAF_METHODS} runs `handler` (GET is the one the OpenAPI document shows, the others are
 * hidden beside it, with the same access), and OPTIONS answers 200 with `Allow` and draws
 * nothing (open: it says only what the route takes). The routes live in a scope of their own
 * where any request body, of any type, is read (up to api.bodyLimit) and ignored, as Spring
 * ignores a body the mapping binds nothing from: a Leaf client that POSTs a form still gets its
 * answer, where idmint's JSON routes would say 415. Auth, errors, metrics and the OpenAPI
 * document come from `app` as for any route.
 */
export function leafRoute<C extends RouteContract, Answer = AnswerOf<C>>(
  app: FastifyInstance,
  contract: C,
  options: LeafRouteOptions = {},
): { handle(handler: ContractHandler<C, Answer>): void } {
  const { url, access } = contract;
  const others = LEAF_METHODS.filter((method) => method !== 'GET');
  return {
    handle(handler) {
      app.register(async (leaf) => {
        leaf.removeAllContentTypeParsers();
        leaf.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) =>
          done(null, undefined),
        );
        if (options.form === true)
          leaf.addContentTypeParser(
            'application/x-www-form-urlencoded',
            { parseAs: 'string' },
            (_request, body, done) => done(null, body),
          );
        leaf.get<RouteTypes<C, Answer>>(url, routeOptions(contract), handler);
        leaf.route<RouteTypes<C, Answer>>({
          method: others,
          url,
          config: { access },
          schema: { hide: true },
          handler,
        });
        leaf.options(
          url,
          { config: { access: 'open' }, schema: { hide: true } },
          (_request, reply) => {
            reply.header('allow', LEAF_ALLOW).code(200).send();
          },
        );
      });
    },
  };
}

/**
 * The content type of a Leaf ID answer for a request's `Accept` header. Leaf's controller returns
 * a String, which Spring writes as it is (StringHttpMessageConverter comes before Jackson, and
 * takes every media type) under the type the client asked for: `Accept: application/json` gets
 * the bare decimal, a JSON number, as `application/json`. Every other Accept, and none, gets
 * text/plain (Spring would echo a type such as text/html; the body is the same).
 *
 * Media ranges are ranked by quality, then concrete types before `type/*` before `*\/*`, then in
 * the header's order (RFC 9110); a q=0 range is a refused one. `application/json`, any
 * `application/...+json` and `application/*` pick JSON; `text/...` and `*\/*` pick text/plain.
 */
export function leafContentType(accept: string | undefined): string {
  // The hot path: no Accept, or one naming no application type (curl's `*/*`), is text/plain.
  if (accept === undefined || !accept.includes('application/')) return TEXT_TYPE;
  for (const { type, subtype } of acceptRanges(accept)) {
    if (
      type === 'application' &&
      (subtype === 'json' || subtype.endsWith('+json') || subtype === '*')
    )
      return JSON_TYPE;
    if (type === 'text' || type === '*') return TEXT_TYPE;
  }
  return TEXT_TYPE;
}

/**
 * An `Accept` header's media ranges, best first: by quality, then concrete types before `type/*`
 * before `*\/*`, then in the header's order (RFC 9110); q=0 ranges (refused ones) are left out.
 */
function acceptRanges(accept: string): { type: string; subtype: string }[] {
  return accept
    .split(',')
    .map((part, index) => {
      const [range = '', ...params] = part.split(';').map((piece) => piece.trim().toLowerCase());
      const q = params.find((param) => param.startsWith('q='));
      const quality = q === undefined ? 1 : Number(q.slice(2));
      const [type = '', subtype = ''] = range.split('/');
      const specificity = type === '*' ? 0 : subtype === '*' ? 1 : 2;
      return { type, subtype, quality: Number.isFinite(quality) ? quality : 0, specificity, index };
    })
    .filter((range) => range.quality > 0)
    .sort((a, b) => b.quality - a.quality || b.specificity - a.specificity || a.index - b.index);
}

/**
 * {@link leafContentType} as Leaf's server spells it: Spring Boot 1.5's StringHttpMessageConverter
 * adds `charset=UTF-8` and Tomcat prints the type with no space (`text/plain;charset=UTF-8`,
 * `application/json;charset=UTF-8`), byte for byte what Leaf sends. For Leaf's ID routes.
 */
export function leafIdType(accept: string | undefined): string {
  return leafContentType(accept) === TEXT_TYPE ? LEAF_TEXT_TYPE : LEAF_JSON_TYPE;
}

/** Leaf's text answers' type, as Tomcat writes it. */
export const LEAF_TEXT_TYPE = 'text/plain;charset=UTF-8';

/** Leaf's JSON answers' type, as Tomcat writes it (see leaf-decode.ts). */
export const LEAF_JSON_TYPE = 'application/json;charset=UTF-8';

/**
 * Whether a batch request asked for binary IDs: `application/octet-stream` ranks above any JSON
 * range in its `Accept` (by the same rules as {@link leafContentType}). JSON stays the answer for
 * no Accept, `*\/*`, `application/*` and anything else, so existing clients see no change.
 */
export function wantsOctets(accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes('application/octet-stream')) return false;
  for (const { type, subtype } of acceptRanges(accept)) {
    if (type === 'application' && subtype === 'octet-stream') return true;
    if (
      type === '*' ||
      (type === 'application' &&
        (subtype === 'json' || subtype.endsWith('+json') || subtype === '*'))
    )
      return false;
  }
  return false;
}

/**
 * IDs as consecutive big-endian unsigned 64-bit integers, 8 bytes each: about a third of the
 * JSON's size for 19-digit IDs, and no decimal formatting on either side. Opaque segment IDs
 * arrive as their decimal text (under 2^63) and are sent as the integers they spell.
 */
export function idsOctets(ids: readonly (bigint | string)[]): Buffer {
  const bytes = Buffer.allocUnsafe(ids.length * 8);
  // DataView's setBigUint64 is an intrinsic: 10 times or more faster than Buffer's
  // writeBigUInt64BE.
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as bigint | string;
    view.setBigUint64(i * 8, typeof id === 'bigint' ? id : BigInt(id));
  }
  return bytes;
}

/** 2^32: an ID is written as two 32-bit halves. */
const TWO_32 = 4_294_967_296;

/**
 * Whether this host stores a Uint32Array's words least significant byte first (every Node target in
 * practice).
 */
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A 32-bit word's bytes reversed, as an int32 (a Uint32Array stores it as the same bits). */
const swapBytes = (word: number): number =>
  ((word & 0xff) << 24) | ((word & 0xff00) << 8) | ((word >>> 8) & 0xff00) | (word >>> 24);

/** A 32-bit value as the word whose bytes in memory read big-endian. */
const bigEndianWord: (word: number) => number = LITTLE_ENDIAN_HOST ? swapBytes : (word) => word | 0;

/**
 * Writes a run's IDs (`start`, `start + stride`, ...: `run.count` of them) into `bytes` as
 * big-endian unsigned 64-bit integers from ID index `at`; returns the index after the last.
 * Each ID is two 32-bit words stored through a Uint32Array: the high word changes only when the
 * low one wraps, so the loop between wraps is int32 arithmetic and one byte swap per ID, with no
 * BigInt or double division per ID. This is what lets a binary batch run at hundreds of millions
 * of IDs per second in memory (a DataView with a double split per ID ran at about 57 million,
 * which capped a 1,000,000-ID batch over HTTP near 40 million).
 */
export function writeRunOctets(
  bytes: Buffer,
  at: number,
  run: { readonly start: bigint; readonly stride: number; readonly count: number },
): number {
  const { stride, count } = run;
  if ((bytes.byteOffset + at * 8) % 4 !== 0) {
    // A Uint32Array needs 4-byte alignment; Node's Buffers are 8-aligned, a subarray may not be.
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    for (let i = 0; i < count; i++) view.setBigUint64((at + i) * 8, run.start + BigInt(i * stride));
    return at + count;
  }
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset + at * 8, count * 2);
  let high = Number(run.start >> 32n);
  let low = Number(run.start & 0xffff_ffffn);
  let word = 0;
  for (let left = count; left > 0; ) {
    // The IDs before the low word wraps: low + k * stride stays below 2^32 for k < span.
    const span = Math.min(left, Math.floor((TWO_32 - 1 - low) / stride) + 1);
    const highWord = bigEndianWord(high);
    let lowBits = low | 0;
    for (let i = 0; i < span; i++, word += 2) {
      words[word] = highWord;
      words[word + 1] = bigEndianWord(lowBits);
      lowBits = (lowBits + stride) | 0;
    }
    left -= span;
    const next = low + span * stride;
    high += Math.floor(next / TWO_32);
    low = next % TWO_32;
  }
  return at + count;
}

/** IDs turned into JSON text per slice, with the event loop let run between slices (~3 ms each). */
export const JSON_SLICE = 16_384;

/** ASCII bytes of the JSON text. */
const QUOTE = 0x22;
const COMMA = 0x2c;
const ZERO = 0x30;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * {@link idsJson} for runs of IDs (`start`, `start + stride`, ...: `count` of each), as UTF-8
 * bytes written straight into one Buffer: each ID's decimal digits are the previous one's plus
 * the stride, added in place, so no string, BigInt or number is made per ID. Strings were what
 * made a large JSON batch dear: 100,000 IDs as strings (joined at once or in slices) cost several
 * times more per ID than 10,000, from the garbage collector, where this stays flat. The event
 * loop runs every {@link JSON_SLICE} IDs.
 */
export async function runsJson(
  head: string,
  runs: readonly { readonly start: bigint; readonly stride: number; readonly count: number }[],
): Promise<Buffer> {
  const opening = Buffer.from(`${head}"ids":[`, 'utf8');
  let size = opening.length + 2;
  for (const run of runs) {
    // IDs grow within a run: the last one has the most digits; 3 more bytes for `"",`.
    if (run.count > 0)
      size +=
        run.count * (String(run.start + BigInt(run.stride) * BigInt(run.count - 1)).length + 3);
  }
  const out = Buffer.allocUnsafe(size);
  let at = opening.copy(out, 0);
  // The current ID's digits, right-aligned in 20 bytes (2^64 has 20 digits).
  const digits = Buffer.alloc(20);
  let sliceLeft = JSON_SLICE;
  for (const run of runs) {
    const text = run.start.toString();
    let from = 20 - text.length;
    digits.write(text, from, 'latin1');
    for (let i = 0; i < run.count; i++) {
      if (i > 0) {
        for (let carry = run.stride, p = 19; carry > 0; p--) {
          if (p < from) digits[(from = p)] = ZERO;
          const sum = (digits[p] as number) - ZERO + carry;
          digits[p] = ZERO + (sum % 10);
          carry = Math.floor(sum / 10);
        }
      }
      if (at > opening.length) out[at++] = COMMA;
      out[at++] = QUOTE;
      for (let p = from; p < 20; p++) out[at++] = digits[p] as number;
      out[at++] = QUOTE;
      if (--sliceLeft === 0) {
        await yieldToEventLoop();
        sliceLeft = JSON_SLICE;
      }
    }
  }
  out[at++] = CLOSE_ARRAY;
  out[at++] = CLOSE_OBJECT;
  return out.subarray(0, at);
}
