import { useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { ApiError, createTag, getTag, updateTag } from '../api.ts';
import { errorText } from '../format.ts';

/**
 * A number field's text as sent: a plain number when it is one, else the text itself, so the
 * server's own validation judges it and its message is what the operator reads.
 */
function numberOrText(text: string): number | string {
  return /^-?[0-9]+(\.[0-9]+)?$/.test(text.trim()) ? Number(text.trim()) : text;
}

/**
 * TinyId's delta and remainder as sent: both together, as the API takes them, and nothing when
 * the form says every ID (delta 1, remainder 0) and `always` is false.
 */
function sequenceOf(
  delta: string,
  remainder: string,
  always: boolean,
): { delta?: number; remainder?: number } {
  if (!always && delta.trim() === '1' && remainder.trim() === '0') return {};
  return {
    delta: numberOrText(delta) as number,
    remainder: numberOrText(remainder === '' ? '0' : remainder) as number,
  };
}

/** The two sequence fields, labelled as the API documents them. */
function SequenceFields(props: {
  readonly id: string;
  readonly delta: string;
  readonly remainder: string;
  readonly disabled?: boolean;
  readonly onDelta: (value: string) => void;
  readonly onRemainder: (value: string) => void;
}) {
  return (
    <>
      <label for={`${props.id}-delta`}>Delta (every Nth ID; 1: every ID)</label>
      <input
        id={`${props.id}-delta`}
        inputMode="numeric"
        value={props.delta}
        disabled={props.disabled}
        onInput={(event) => props.onDelta((event.currentTarget as HTMLInputElement).value)}
      />
      <label for={`${props.id}-remainder`}>Remainder (IDs ≡ remainder mod delta)</label>
      <input
        id={`${props.id}-remainder`}
        inputMode="numeric"
        value={props.remainder}
        disabled={props.disabled}
        onInput={(event) => props.onRemainder((event.currentTarget as HTMLInputElement).value)}
      />
    </>
  );
}

/** A modal dialog (the browser's <dialog>: focus moves in, Escape closes, focus returns). */
function Dialog(props: {
  readonly title: string;
  readonly onClose: () => void;
  readonly children: ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (element === null) return;
    const opener = document.activeElement as HTMLElement | null;
    element.showModal();
    return () => opener?.focus();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="dialog-title" onClose={props.onClose}>
      <h2 id="dialog-title">{props.title}</h2>
      {props.children}
    </dialog>
  );
}

function ErrorLine(props: { readonly error: ApiError | null }) {
  return props.error === null ? null : (
    <p class="banner error" role="alert" data-testid="form-error">
      {errorText(props.error)}
    </p>
  );
}

function asApiError(caught: unknown): ApiError {
  return caught instanceof ApiError ? caught : new ApiError(0, 'ERROR', String(caught));
}

/**
 * POST /v1/tags from the page: the same route, the same validation, its errors shown as the server
 * words them.
 */
export function NewTagDialog(props: {
  readonly token: string;
  readonly onClose: (created: boolean) => void;
}) {
  const [tag, setTag] = useState('');
  const [step, setStep] = useState('1000');
  const [description, setDescription] = useState('');
  const [delta, setDelta] = useState('1');
  const [remainder, setRemainder] = useState('0');
  const [ordered, setOrdered] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <Dialog title="New tag" onClose={() => props.onClose(false)}>
      <form
        noValidate
        onSubmit={async (event) => {
          event.preventDefault();
          setBusy(true);
          try {
            await createTag(props.token, {
              tag,
              step: numberOrText(step) as number,
              ...(description === '' ? {} : { description }),
              ...sequenceOf(delta, remainder, false),
              ...(ordered ? { ordering: 'cluster' as const } : {}),
            });
            props.onClose(true);
          } catch (caught) {
            setError(asApiError(caught));
            setBusy(false);
          }
        }}
      >
        <label for="new-tag">Tag</label>
        <input
          id="new-tag"
          value={tag}
          autocomplete="off"
          spellcheck={false}
          onInput={(event) => setTag((event.currentTarget as HTMLInputElement).value)}
        />
        <label for="new-step">Step (IDs per range)</label>
        <input
          id="new-step"
          inputMode="numeric"
          value={step}
          onInput={(event) => setStep((event.currentTarget as HTMLInputElement).value)}
        />
        <label for="new-description">Description (optional)</label>
        <input
          id="new-description"
          value={description}
          onInput={(event) => setDescription((event.currentTarget as HTMLInputElement).value)}
        />
        <SequenceFields
          id="new"
          delta={delta}
          remainder={remainder}
          onDelta={setDelta}
          onRemainder={setRemainder}
        />
        <label class="check" for="new-ordering">
          <input
            id="new-ordering"
            type="checkbox"
            checked={ordered}
            onChange={(event) => setOrdered((event.currentTarget as HTMLInputElement).checked)}
          />{' '}
          Cluster order (one node at a time issues it)
        </label>
        <p class="muted small">
          Every answer is above every earlier one anywhere in the cluster; set now or never
          (docs/segments.md, Cluster order).
        </p>
        <ErrorLine error={error} />
        <div class="row end">
          <button type="button" onClick={() => props.onClose(false)}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy}>
            Create
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/**
 * PATCH /v1/tags/:tag: change the step, the description or the sequence (TinyId's delta and
 * remainder, sent together); the tag is read first to fill the form.
 */
export function EditTagDialog(props: {
  readonly token: string;
  readonly tag: string;
  readonly onClose: (changed: boolean) => void;
}) {
  const [step, setStep] = useState('');
  const [description, setDescription] = useState('');
  const [delta, setDelta] = useState('');
  const [remainder, setRemainder] = useState('');
  const [original, setOriginal] = useState<{
    step: number;
    description: string;
    delta: string;
    remainder: string;
    ordered: boolean;
  } | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    getTag(props.token, props.tag).then(
      (record) => {
        const sequence = { delta: String(record.delta), remainder: String(record.remainder) };
        setOriginal({
          step: record.step,
          description: record.description ?? '',
          ...sequence,
          ordered: record.ordering === 'cluster',
        });
        setStep(String(record.step));
        setDescription(record.description ?? '');
        setDelta(sequence.delta);
        setRemainder(sequence.remainder);
      },
      (caught: unknown) => setError(asApiError(caught)),
    );
  }, [props.tag]);
  return (
    <Dialog title={`Edit ${props.tag}`} onClose={() => props.onClose(false)}>
      <form
        noValidate
        onSubmit={async (event) => {
          event.preventDefault();
          if (original === null) return;
          const body: {
            step?: number;
            description?: string | null;
            delta?: number;
            remainder?: number;
          } = {};
          if (step !== String(original.step)) body.step = numberOrText(step) as number;
          if (description !== original.description)
            body.description = description === '' ? null : description;
          if (delta !== original.delta || remainder !== original.remainder)
            Object.assign(body, sequenceOf(delta, remainder, true));
          if (Object.keys(body).length === 0) {
            props.onClose(false);
            return;
          }
          setBusy(true);
          try {
            await updateTag(props.token, props.tag, body);
            props.onClose(true);
          } catch (caught) {
            setError(asApiError(caught));
            setBusy(false);
          }
        }}
      >
        <label for="edit-step">Step (IDs per range)</label>
        <input
          id="edit-step"
          inputMode="numeric"
          value={step}
          disabled={original === null}
          onInput={(event) => setStep((event.currentTarget as HTMLInputElement).value)}
        />
        <p class="muted small">A new step applies as in Leaf: see docs/segments.md, Steps.</p>
        <label for="edit-description">Description</label>
        <input
          id="edit-description"
          value={description}
          disabled={original === null}
          onInput={(event) => setDescription((event.currentTarget as HTMLInputElement).value)}
        />
        <SequenceFields
          id="edit"
          delta={delta}
          remainder={remainder}
          disabled={original === null}
          onDelta={setDelta}
          onRemainder={setRemainder}
        />
        <p class="muted small">A new delta applies above the IDs already allocated.</p>
        {original?.ordered === true && (
          <p class="small" data-testid="tag-ordering">
            Cluster order: one node at a time issues this tag (set at creation, never changed).
          </p>
        )}
        <ErrorLine error={error} />
        <div class="row end">
          <button type="button" onClick={() => props.onClose(false)}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy || original === null}>
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}
