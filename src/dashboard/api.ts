// Calls to the idmint API from the page, with the bearer token as any client sends it.

import type { Status } from '../contract/status.ts';
import type { NewTag, Tag, TagChanges } from '../contract/tags.ts';
import type { TagQuery } from './status-types.ts';
import { statusQueryString } from './format.ts';

/** A failed call, with the server's error code and message (or NETWORK when no answer came). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * One API call; resolves to the JSON answer, rejects with an ApiError carrying the server's code
 * and message.
 */
export async function call<T>(
  path: string,
  options: {
    readonly token: string;
    readonly method?: string;
    readonly body?: unknown;
    readonly signal?: AbortSignal;
  },
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.token !== '') headers['authorization'] = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method: options.method ?? 'GET',
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      cache: 'no-store',
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError(0, 'NETWORK', 'the server did not answer (is it running?)');
  }
  const text = await response.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const error = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(
      response.status,
      error?.code ?? `HTTP_${response.status}`,
      error?.message ?? (text.slice(0, 200) || response.statusText),
    );
  }
  return json as T;
}

export function fetchStatus(token: string, query: TagQuery, signal: AbortSignal): Promise<Status> {
  return call<Status>(`/v1/status${statusQueryString(query)}`, { token, signal });
}

export function createTag(token: string, body: NewTag): Promise<Tag> {
  return call<Tag>('/v1/tags', { token, method: 'POST', body });
}

export function updateTag(token: string, tag: string, body: TagChanges): Promise<Tag> {
  return call<Tag>(`/v1/tags/${encodeURIComponent(tag)}`, { token, method: 'PATCH', body });
}

export function getTag(token: string, tag: string): Promise<Tag> {
  return call<Tag>(`/v1/tags/${encodeURIComponent(tag)}`, { token });
}
