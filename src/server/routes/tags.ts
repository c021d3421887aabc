import type { FastifyInstance } from 'fastify';
import { CREATE_TAG, GET_TAG, LIST_TAGS, Tag, UPDATE_TAG } from '../../contract/tags.ts';
import { IdMintError } from '../../core/errors.ts';
import { checkDescription, checkTag, tagNotFound } from '../../core/segment-limits.ts';
import type { SegmentStore, TagRecord } from '../../ports/segment-store.ts';
import { parsePeriodic } from '../../core/periodic.ts';
import { noOpaqueKeys, type OpaqueIds } from '../../service/opaque-ids.ts';
import { checkOpaqueStart } from '../../stores/store-support.ts';
import { checkNewOrdering, orderedNotOpaque } from '../../stores/tag-ordering.ts';
import { tagJson } from '../../shared/tag-json.ts';
import { contractRoute } from './from-contract.ts';

/** What the tag routes need. */
export interface TagRouteDeps {
  /** Absent when segment mode is off: the routes then answer MODE_DISABLED. */
  readonly store: SegmentStore | undefined;
  /**
   * Called (and awaited) after a tag is created or changed, with the record written, so the ID
   * routes see it at once.
   */
  readonly onTagChanged?: (record: TagRecord) => Promise<void>;
  /** The opaque keys; absent when none are configured: then no tag can be made opaque here. */
  readonly opaque?: OpaqueIds | undefined;
}

/**
 * Tag administration over the segment store: list, read, create (409 if it exists), change the
 * step or description. Writes need the admin token when auth is on.
 */
export function tagRoutes(app: FastifyInstance, deps: TagRouteDeps): void {
  const store = (): SegmentStore => {
    if (deps.store === undefined) {
      throw new IdMintError(
        'MODE_DISABLED',
        'segment mode, and with it tag administration, is turned off on this server ' +
          '(segment.enabled / IDMINT_SEGMENT_ENABLED)',
      );
    }
    return deps.store;
  };
  // A tag this node could not serve is not made opaque here: it would have no IDs at all.
  const checkKeys = (tag: string) => {
    if (deps.opaque === undefined) throw noOpaqueKeys(`making tag "${tag}" opaque`, { tag });
  };
  app.addSchema(Tag);

  contractRoute(app, LIST_TAGS).handle(async (request) => {
    const records = await store().listTags();
    const principal = request.principal;
    const visible =
      principal === undefined ? records : records.filter((record) => principal.allows(record.tag));
    return { tags: visible.map(tagJson) };
  });

  contractRoute(app, GET_TAG).handle(async (request) => {
    const tag = checkTag(request.params.tag);
    const record = await store().getTag(tag);
    if (record === undefined) throw tagNotFound(tag);
    return tagJson(record);
  });

  contractRoute(app, CREATE_TAG).handle(async (request, reply) => {
    const { tag, step, startId, description, opaque, delta, remainder, periodic, ordering } =
      request.body;
    const segments = store();
    // Before the keys: an ordered opaque tag is refused for what it is, not for a missing key.
    checkNewOrdering(request.body);
    if (opaque === true) checkKeys(tag);
    const record = await segments.createTag({
      tag,
      step,
      ...(startId === undefined ? {} : { startId: BigInt(startId) }),
      ...(description === undefined ? {} : { description: checkDescription(description) }),
      ...(opaque === true ? { opaque } : {}),
      ...(delta === undefined ? {} : { delta }),
      ...(remainder === undefined ? {} : { remainder }),
      ...(periodic === undefined ? {} : { periodic }),
      ...(ordering === undefined ? {} : { ordering }),
    });
    await deps.onTagChanged?.(record);
    return reply.code(201).send(tagJson(record));
  });

  contractRoute(app, UPDATE_TAG).handle(async (request) => {
    const tag = checkTag(request.params.tag);
    const { step, description, opaque, delta, remainder } = request.body;
    const segments = store();
    if (step !== undefined || opaque === true) {
      const current = await segments.getTag(tag);
      if (current === undefined) throw tagNotFound(tag);
      if (current.periodic !== undefined) {
        // Formatted IDs are the point of a periodic tag; and each period must hold a range.
        if (opaque === true)
          throw new IdMintError(
            'INVALID_ARGUMENT',
            `tag "${tag}" is periodic and cannot be opaque`,
          );
        if (step !== undefined) parsePeriodic(current.periodic).checkStep(step);
      }
    }
    if (opaque !== undefined) {
      const current = await segments.getTag(tag);
      if (current === undefined) throw tagNotFound(tag);
      if (opaque === false && current.opaque === true) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `tag "${tag}" is opaque and stays opaque; create a new tag instead`,
        );
      }
      if (opaque === true && current.opaque !== true) {
        if (current.ordering !== undefined) throw orderedNotOpaque(tag);
        checkKeys(tag);
        // The next range starts at max_id: its IDs must still have an opaque form.
        checkOpaqueStart(tag, current.maxId);
      }
    }
    const record = await segments.updateTag(tag, {
      ...(step === undefined ? {} : { step }),
      ...(description === undefined ? {} : { description: checkDescription(description) }),
      ...(opaque === true ? { opaque } : {}),
      ...(delta === undefined ? {} : { delta }),
      ...(remainder === undefined ? {} : { remainder }),
    });
    await deps.onTagChanged?.(record);
    return tagJson(record);
  });
}
