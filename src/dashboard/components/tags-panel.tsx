import { useEffect, useRef, useState } from 'preact/hooks';
import { formatCount, formatMs, formatRate, nextSort, rangeProgress } from '../format.ts';
import type { OrderedTagStatus, SegmentStatus, TagStatus } from '../../contract/status.ts';
import type { TagQuery } from '../status-types.ts';
import { Sparkline } from './sparkline.tsx';
import { EditTagDialog, NewTagDialog } from './tag-forms.tsx';

const SERVING_TEXT: Readonly<Record<TagStatus['serving'], string>> = {
  memory: 'memory',
  loading: 'loading',
  failing: 'failing',
  'not-loaded': 'not loaded',
};

const NEXT_TEXT: Readonly<Record<TagStatus['nextLoad'], string>> = {
  ready: 'ready',
  loading: 'loading…',
  pending: 'pending',
  failing: 'failing',
};

interface Column {
  readonly label: string;
  readonly sort?: TagQuery['sort'];
  readonly num?: boolean;
}

const COLUMNS: readonly Column[] = [
  { label: 'Tag', sort: 'tag' },
  { label: 'Mode' },
  { label: 'Current range' },
  { label: 'Next range' },
  { label: 'Buffer', sort: 'fill' },
  { label: 'Step', sort: 'step', num: true },
  { label: 'Last load', sort: 'latency', num: true },
  { label: 'IDs/s (1 min)', sort: 'rate', num: true },
];

/** The tags: searched, sorted and paged by the server, so thousands cost one page. */
export function TagsPanel(props: {
  readonly segment: SegmentStatus;
  readonly query: TagQuery;
  readonly onQuery: (query: TagQuery) => void;
  readonly admin: boolean;
  readonly token: string;
  readonly onChanged: () => void;
}) {
  const { segment, query } = props;
  const [search, setSearch] = useState(query.q);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const onQuery = useRef(props.onQuery);
  onQuery.current = props.onQuery;
  const latestQuery = useRef(query);
  latestQuery.current = query;

  // The search goes to the server a moment after the last key, not on every key.
  useEffect(() => {
    if (search === latestQuery.current.q) return;
    const timer = setTimeout(
      () => onQuery.current({ ...latestQuery.current, q: search, offset: 0 }),
      250,
    );
    return () => clearTimeout(timer);
  }, [search]);

  const first = segment.matched === 0 ? 0 : segment.offset + 1;
  const last = Math.min(segment.offset + segment.tags.length, segment.matched);
  return (
    <section class="panel tags" aria-labelledby="tags-title">
      <div class="panel-head">
        <h2 id="tags-title">
          Tags{' '}
          <span class="muted">
            {formatCount(segment.total)} · {formatCount(segment.inUse)} in use · store{' '}
            {segment.store}
          </span>
        </h2>
        <div class="toolbar">
          <label for="tag-search" class="visually-hidden">
            Search tags
          </label>
          <input
            id="tag-search"
            type="search"
            placeholder="Search tags"
            value={search}
            onInput={(event) => setSearch((event.currentTarget as HTMLInputElement).value)}
          />
          <label class="check">
            <input
              type="checkbox"
              checked={query.tags === 'in-use'}
              onChange={(event) =>
                props.onQuery({
                  ...query,
                  tags: (event.currentTarget as HTMLInputElement).checked ? 'in-use' : 'all',
                  offset: 0,
                })
              }
            />
            In use only
          </label>
          {props.admin && (
            <button type="button" class="primary" onClick={() => setCreating(true)}>
              New tag
            </button>
          )}
        </div>
      </div>
      <div class="scroll">
        <table class="tag-table">
          <caption class="visually-hidden">
            Tags, {query.sort === 'tag' ? 'by name' : `sorted by ${query.sort}`}
          </caption>
          <thead>
            <tr>
              {COLUMNS.map((column) => {
                const active = column.sort !== undefined && query.sort === column.sort;
                return (
                  <th
                    key={column.label}
                    scope="col"
                    class={column.num ? 'num' : undefined}
                    aria-sort={
                      active ? (query.order === 'asc' ? 'ascending' : 'descending') : undefined
                    }
                  >
                    {column.sort === undefined ? (
                      column.label
                    ) : (
                      <button
                        type="button"
                        class="sort"
                        onClick={() =>
                          props.onQuery(nextSort(query, column.sort as TagQuery['sort']))
                        }
                      >
                        {column.label}
                        <span aria-hidden="true" class="arrow">
                          {active ? (query.order === 'asc' ? '▲' : '▼') : '↕'}
                        </span>
                      </button>
                    )}
                  </th>
                );
              })}
              {props.admin && (
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {segment.tags.map((tag) => (
              <TagRow
                key={tag.tag}
                tag={tag}
                ordered={segment.ordered.find((o) => o.tag === tag.tag)}
                admin={props.admin}
                onEdit={() => setEditing(tag.tag)}
              />
            ))}
          </tbody>
        </table>
      </div>
      {segment.tags.length === 0 && (
        <p class="muted empty">
          {segment.total === 0
            ? 'No tags yet.'
            : query.tags === 'in-use' && query.q === ''
              ? 'No tag in use on this node yet.'
              : 'No tag matches the search.'}
        </p>
      )}
      <nav class="pager" aria-label="Tag pages">
        <span aria-live="polite">
          {formatCount(first)}–{formatCount(last)} of {formatCount(segment.matched)}
          {segment.matched !== segment.total && ` (of ${formatCount(segment.total)} tags)`}
        </span>
        <button
          type="button"
          disabled={segment.offset === 0}
          onClick={() =>
            props.onQuery({ ...query, offset: Math.max(0, query.offset - query.limit) })
          }
        >
          Previous
        </button>
        <button
          type="button"
          disabled={last >= segment.matched}
          onClick={() => props.onQuery({ ...query, offset: query.offset + query.limit })}
        >
          Next
        </button>
      </nav>
      {creating && (
        <NewTagDialog
          token={props.token}
          onClose={(created) => {
            setCreating(false);
            if (created) props.onChanged();
          }}
        />
      )}
      {editing !== null && (
        <EditTagDialog
          token={props.token}
          tag={editing}
          onClose={(changed) => {
            setEditing(null);
            if (changed) props.onChanged();
          }}
        />
      )}
    </section>
  );
}

/** Who issues a cluster-ordered tag, as this node sees it (docs/segments.md, Cluster order). */
function issuerText(ordered: OrderedTagStatus): string {
  if (ordered.issuer === 'self') return 'Cluster order: issued here';
  if (ordered.issuer === null) return 'Cluster order: no issuer known';
  return `Cluster order: issued by ${ordered.issuer}`;
}

function TagRow(props: {
  readonly tag: TagStatus;
  /** Present for a cluster-ordered tag this node has served or forwarded. */
  readonly ordered: OrderedTagStatus | undefined;
  readonly admin: boolean;
  readonly onEdit: () => void;
}) {
  const t = props.tag;
  const steps = t.steps.map((load) => load.step);
  const fillPercent = Math.round(t.fill * 100);
  return (
    <tr data-tag={t.tag}>
      <th scope="row" data-label="Tag">
        <code>{t.tag}</code>
      </th>
      <td data-label="Mode">
        <span
          class={`pill ${t.serving}`}
          title={
            t.lastError === null
              ? undefined
              : t.lastError.message === null
                ? t.lastError.code
                : `${t.lastError.code}: ${t.lastError.message}`
          }
        >
          {SERVING_TEXT[t.serving]}
        </span>
        {t.lastError !== null && <div class="error-text">{t.lastError.code}</div>}
        {props.ordered !== undefined && (
          <div
            class="issuer-text"
            data-testid="tag-issuer"
            title={`epoch ${props.ordered.epoch ?? '-'}, ${props.ordered.handovers} handovers`}
          >
            {issuerText(props.ordered)}
          </div>
        )}
      </td>
      <td data-label="Current range" class="range">
        {t.range === null ? (
          <span class="muted">—</span>
        ) : (
          <>
            <span class="ids">
              <span data-testid="position">{t.range.position}</span>{' '}
              <span class="muted">
                in [{t.range.start}, {t.range.end})
              </span>
            </span>
            <progress
              max={1}
              value={rangeProgress(t.range)}
              aria-label={`Position of ${t.tag} in its current range`}
            />
          </>
        )}
      </td>
      <td data-label="Next range">
        <span class={`next ${t.nextLoad}`}>
          {t.range === null && t.nextLoad === 'pending' ? 'on first use' : NEXT_TEXT[t.nextLoad]}
        </span>
        {t.nextLoad === 'pending' && t.idsUntilNextLoad !== null && (
          <div class="muted small">after {formatCount(t.idsUntilNextLoad)} IDs</div>
        )}
      </td>
      <td data-label="Buffer">
        {/* biome-ignore lint/a11y/useSemanticElements: a styled bar; <meter> looks different */}
        <div
          class="fill"
          role="meter"
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={fillPercent}
          aria-label={`Buffer fill of ${t.tag}`}
        >
          <span class={fillPercent < 20 ? 'low' : undefined} style={{ width: `${fillPercent}%` }} />
        </div>
        <div class="muted small">
          {formatCount(t.remaining)} IDs · {fillPercent}%
        </div>
      </td>
      <td data-label="Step" class="num">
        {t.step === 0 ? (
          // No range loaded yet (step 0 in the status): the first load takes the configured step.
          <>
            <span title="The configured step: no range loaded yet">{formatCount(t.tagStep)}</span>
            <div class="muted small">configured</div>
          </>
        ) : (
          <span title={`configured ${t.tagStep}`}>{formatCount(t.step)}</span>
        )}
        <Sparkline
          values={steps.length > 1 ? steps : null}
          label={`Recent steps of ${t.tag}: ${steps.join(', ') || 'none'}`}
        />
      </td>
      <td data-label="Last load" class="num">
        {formatMs(t.lastLoadMs)}
        <div class="muted small">
          {t.loads} loads{t.loadFailures > 0 && `, ${t.loadFailures} failed`}
        </div>
      </td>
      <td data-label="IDs/s (1 min)" class="num">
        <span data-testid="tag-rate">{formatRate(t.idsPerSecond, '')}</span>
        <Sparkline values={t.rates} label={`IDs per second of ${t.tag} over the last minute`} />
      </td>
      {props.admin && (
        <td data-label="">
          <button type="button" onClick={props.onEdit} aria-label={`Edit ${t.tag}`}>
            Edit
          </button>
        </td>
      )}
    </tr>
  );
}
