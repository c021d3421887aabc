import { useEffect, useRef, useState } from 'preact/hooks';
import type { ApiError } from '../api.ts';

/** Asked for when the API answers 401: the page shows nothing else until a valid token is given. */
export function TokenForm(props: {
  readonly error: ApiError | null;
  readonly hadToken: boolean;
  readonly onSubmit: (token: string) => void;
}) {
  const [value, setValue] = useState('');
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  return (
    <section class="panel narrow" aria-labelledby="token-title">
      <h2 id="token-title">This server needs a token</h2>
      <p>
        Auth is on. Enter a token from <code>auth.tokens</code> to see the tags it may use, or the
        admin token to see everything and change tags. It is sent as{' '}
        <code>Authorization: Bearer …</code> and kept in this tab only.
      </p>
      {props.hadToken && props.error !== null && (
        <p class="banner error" role="alert">
          {props.error.code}: {props.error.message}
        </p>
      )}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          props.onSubmit(value.trim());
        }}
      >
        <label for="token">Token</label>
        <div class="row">
          <input
            id="token"
            ref={input}
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={value}
            onInput={(event) => setValue((event.currentTarget as HTMLInputElement).value)}
          />
          <button type="submit" class="primary" disabled={value.trim() === ''}>
            Show the dashboard
          </button>
        </div>
      </form>
    </section>
  );
}
