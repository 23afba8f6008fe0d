// HTTP/1.1 to the supervisor over a Unix socket or TCP through undici (one keep-alive pool per
// Transport), with JSON calls, event streams (frames, or NDJSON) read as they arrive, raw bodies
// streamed both ways, and bounded retries of requests the supervisor turned away.

import { setTimeout as sleep } from 'node:timers/promises';
import { Readable } from 'node:stream';

import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';

import { resolveConnection, type ConnectionOptions, type Endpoint, type RetryOptions } from './endpoint.js';
import {
  AirlockError,
  InternalError,
  SupervisorUnavailableError,
  TimeoutError,
  errorFromResponse,
} from './errors.js';
import { isObject, type JsonObject } from './json.js';

export type Query = Record<string, string> | Array<[string, string]>;

/** What `files.write` can stream up: text, bytes, or a stream / async iterable of chunks. */
export type UploadSource = string | Uint8Array | Readable | AsyncIterable<Uint8Array | string>;

export interface RequestOptions {
  query?: Query;
  /** Seconds of silence on the answer before giving up; null waits for ever. */
  timeout?: number | null;
  /**
   * Seconds to wait for the answer to start, when that differs from `timeout`: a code run or
   * command the review chain holds for an operator has no answer until it is approved.
   */
  answerTimeout?: number | null;
}

interface OpenOptions extends RequestOptions {
  json?: unknown;
  raw?: Uint8Array | Readable | AsyncIterable<Uint8Array | string>;
  headers?: Record<string, string>;
}

/** An answer with status < 400: its headers and its body as a stream. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
}

// An error answer larger than this is cut: it is only read for its message.
const ERROR_BODY_LIMIT = 64 * 1024;

// Requests that may be sent twice without doing twice what they do (RFC 9110, 9.2.2). Only these
// are retried after a connection failed mid-request: a POST that reached the supervisor may have
// started a command.
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

// 429: a tenant or host quota; 503: the supervisor is draining or busy. Either way it did not act.
const RETRY_STATUSES = new Set([429, 503]);

// Failures where no connection was made, and failures of a connection in use.
const CONNECT_CODES = new Set(['ENOENT', 'ECONNREFUSED', 'EACCES', 'UND_ERR_CONNECT_TIMEOUT']);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** One supervisor connection pool; closed by `close()` (Sandbox.kill does it). */
export class Transport {
  readonly endpoint: Endpoint;
  readonly requestTimeout: number;
  readonly retry: RetryOptions;
  private readonly token: string | undefined;
  private readonly ca: string | Buffer | undefined;
  private readonly origin: string;
  private pool: Agent | undefined;

  constructor(options: ConnectionOptions = {}) {
    const resolved = resolveConnection(options);
    this.endpoint = resolved.endpoint;
    this.token = resolved.token;
    this.requestTimeout = resolved.requestTimeout;
    this.retry = resolved.retry;
    this.ca = resolved.ca;
    // undici wants an origin even on a Unix socket, where the host only fills the Host header.
    this.origin =
      this.endpoint.kind === 'unix'
        ? 'http://localhost'
        : `${this.endpoint.tls ? 'https' : 'http'}://${this.endpoint.host.includes(':') ? `[${this.endpoint.host}]` : this.endpoint.host}:${this.endpoint.port}`;
  }

  /** The base URL of links into the supervisor (`portUrl`): the URL this transport was given. */
  get baseUrl(): string {
    return this.endpoint.url.replace(/\/+$/, '');
  }

  /** A JSON call: the decoded answer, or {} for an empty one (204). */
  async json(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<JsonObject> {
    const res = await this.open(method, path, { ...options, json: body });
    const payload = await readAll(res.body, `${method} ${path}`);
    if (payload.length === 0) return {};
    let decoded: unknown;
    try {
      decoded = JSON.parse(payload.toString('utf8'));
    } catch {
      throw new InternalError(
        `${method} ${path}: the supervisor answered HTTP ${res.status} with a body that is not JSON: ` +
          payload.subarray(0, 200).toString('utf8'),
      );
    }
    return isObject(decoded) ? decoded : {};
  }

  /**
   * The events of a streaming answer, each as soon as it is complete. Leaving the loop early
   * closes the connection (which kills a foreground command, docs/api.md). The supervisor sends
   * frames (output as its own bytes, under `bytes`), or NDJSON when it has no frames.
   */
  async *events(method: string, path: string, body?: unknown, options: RequestOptions = {}): AsyncGenerator<JsonObject> {
    const what = `${method} ${path}`;
    const res = await this.open(method, path, {
      ...options,
      json: body,
      headers: { Accept: `${FRAMES_TYPE}, application/x-ndjson` },
    });
    try {
      const type = res.headers['content-type'];
      if ((typeof type === 'string' ? type : '').startsWith(FRAMES_TYPE)) {
        yield* frames(res.body, what);
        return;
      }
      yield* ndjson(res.body, what);
    } finally {
      // Left early (break, a throwing callback): hang up, so the supervisor stops the run.
      if (!res.body.readableEnded) res.body.destroy();
    }
  }

  /** Streams `source` as the request body; the decoded JSON answer. */
  async upload(method: string, path: string, source: UploadSource, options: RequestOptions = {}): Promise<JsonObject> {
    const raw = typeof source === 'string' ? Buffer.from(source, 'utf8') : source;
    const res = await this.open(method, path, {
      ...options,
      raw,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    const payload = await readAll(res.body, `${method} ${path}`);
    try {
      const decoded: unknown = payload.length ? JSON.parse(payload.toString('utf8')) : {};
      return isObject(decoded) ? decoded : {};
    } catch {
      return {};
    }
  }

  /** A raw answer (status < 400) as a stream, for downloads; destroying it stops the download. */
  async download(path: string, options: RequestOptions = {}): Promise<Readable> {
    return (await this.open('GET', path, options)).body;
  }

  /** Closes the pooled connections. Calls made after this open new ones. */
  close(): void {
    const pool = this.pool;
    this.pool = undefined;
    pool?.destroy().catch(() => {});
  }

  private agent(): Agent {
    // Keep-alive: a code run right after another reuses the connection. Idle pooled sockets
    // are unref'd by undici, so an idle pool never keeps the process alive.
    this.pool ??= new Agent(
      this.endpoint.kind === 'unix' ? { connect: { socketPath: this.endpoint.socketPath } }
      : this.ca !== undefined ? { connect: { ca: this.ca } }
      : {},
    );
    return this.pool;
  }

  /**
   * Sends the request, retrying (within `retry`) an answer of 429 or 503 and, for idempotent
   * methods, a failed connection. A body that is a stream cannot be sent twice: it is never
   * retried.
   */
  private async open(method: string, path: string, options: OpenOptions): Promise<Answer> {
    const replayable = !(options.raw !== undefined && !(options.raw instanceof Uint8Array));
    const { attempts, backoff, maxBackoff } = this.retry;
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= attempts || !replayable;
      try {
        return await this.attempt(method, path, options);
      } catch (err) {
        if (last || !(err instanceof Retryable)) throw err instanceof Retryable ? err.error : err;
        if (err.onlyIfIdempotent && !IDEMPOTENT.has(method)) throw err.error;
        // Full jitter on an exponential step, so clients turned away together do not return together.
        let delay = Math.min(maxBackoff, backoff * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
        if (err.retryAfter !== undefined) {
          if (err.retryAfter > maxBackoff) throw err.error; // asks for more patience than allowed
          delay = Math.max(delay, err.retryAfter);
        }
        await sleep(delay * 1000);
      }
    }
  }

  private async attempt(method: string, path: string, options: OpenOptions): Promise<Answer> {
    const what = `${method} ${path}`;
    const query = options.query === undefined ? '' : new URLSearchParams(options.query).toString();
    const headers: Record<string, string> = { Accept: 'application/json', ...options.headers };
    if (this.token !== undefined) headers['Authorization'] = `Bearer ${this.token}`;
    let body: Dispatcher.DispatchOptions['body'] = options.raw as Dispatcher.DispatchOptions['body'];
    if (options.json !== undefined) {
      body = Buffer.from(JSON.stringify(options.json), 'utf8');
      headers['Content-Type'] = 'application/json';
    }
    if (body === undefined && method !== 'GET' && method !== 'HEAD') body = Buffer.alloc(0);
    const timeout = options.timeout === undefined ? this.requestTimeout : options.timeout;
    const answerTimeout = options.answerTimeout === undefined ? timeout : options.answerTimeout;

    let res: Dispatcher.ResponseData;
    try {
      res = await this.agent().request({
        origin: this.origin,
        method: method as Dispatcher.HttpMethod,
        path: query ? `${path}?${query}` : path,
        headers,
        body,
        // undici counts both in ms, 0 for none: the wait for the answer's head, and the
        // silence between chunks of its body (a long stream that keeps sending is never cut).
        headersTimeout: answerTimeout === null ? 0 : Math.ceil(answerTimeout * 1000),
        bodyTimeout: timeout === null ? 0 : Math.ceil(timeout * 1000),
      });
    } catch (err) {
      throw this.requestFailed(err, what, answerTimeout);
    }
    // A body that goes silent past `timeout` ends in a TimeoutError, for whoever reads it.
    res.body.on('error', () => {});
    const answer: Answer = { status: res.statusCode, headers: res.headers, body: res.body };
    interceptBodyTimeout(answer.body, () => new TimeoutError(`${what}: the supervisor at ${this.endpoint.url} sent nothing for ${timeout} s`));
    if (res.statusCode < 400) return answer;
    let payload: Buffer;
    try {
      payload = await readAll(answer.body, what, ERROR_BODY_LIMIT);
    } catch {
      payload = Buffer.alloc(0);
    }
    const error = errorFromResponse(res.statusCode, payload, what);
    if (RETRY_STATUSES.has(res.statusCode)) {
      throw new Retryable(error, false, retryAfterSeconds(res.headers['retry-after']));
    }
    throw error;
  }

  private requestFailed(err: unknown, what: string, answerTimeout: number | null): AirlockError | Retryable {
    if (err instanceof AirlockError) return err;
    if (err instanceof undiciErrors.HeadersTimeoutError) {
      return new TimeoutError(`${what}: the supervisor at ${this.endpoint.url} did not answer within ${answerTimeout} s`);
    }
    const code = (err as { code?: unknown }).code;
    const error = this.connectError(err, what);
    if (typeof code === 'string' && CONNECT_CODES.has(code) && code !== 'EACCES') return new Retryable(error, true);
    if (typeof code === 'string' && RESET_CODES.has(code)) return new Retryable(error, true);
    return error;
  }

  private connectError(err: unknown, what: string): AirlockError {
    const where = this.endpoint.kind === 'unix' ? this.endpoint.socketPath : `${this.endpoint.host}:${this.endpoint.port}`;
    const code = (err as { code?: unknown }).code;
    const message = err instanceof Error ? err.message : String(err);
    if (code === 'ENOENT' || code === 'ECONNREFUSED') {
      return new SupervisorUnavailableError(`cannot connect to ${where}: ${code} — is airlock serve running?`, {
        cause: err,
      });
    }
    if (code === 'EACCES') {
      return new SupervisorUnavailableError(
        `cannot connect to ${where}: EACCES — the socket's mode or group (policy [server] socket_mode, socket_group) does not let this user in`,
        { cause: err },
      );
    }
    return new SupervisorUnavailableError(`${what}: connection to ${where} failed: ${message}`, { cause: err });
  }
}

/** A failure the retry loop may try again; `error` is what the caller sees when it stops. */
class Retryable extends Error {
  constructor(
    readonly error: AirlockError,
    /** A connection failure: the request may have reached the supervisor. */
    readonly onlyIfIdempotent: boolean,
    /** The answer's Retry-After, in seconds. */
    readonly retryAfter?: number,
  ) {
    super(error.message);
  }
}

/** Retry-After as seconds: a number of seconds or an HTTP date (RFC 9110, 10.2.3). */
export function retryAfterSeconds(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

/** Turns undici's body timeout on `body` into the SDK's TimeoutError. */
function interceptBodyTimeout(body: Readable, make: () => TimeoutError): void {
  const destroy = body.destroy.bind(body);
  body.destroy = (error?: Error): Readable =>
    destroy(error instanceof undiciErrors.BodyTimeoutError ? make() : error);
}

function parseEventLine(line: string, what: string): JsonObject {
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    throw new InternalError(`${what}: the supervisor sent an event line that is not JSON: ${line.slice(0, 200)}`);
  }
  return isObject(event) ? event : {};
}

function connectionLost(err: unknown, what: string): AirlockError {
  if (err instanceof AirlockError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new SupervisorUnavailableError(`${what}: the connection to the supervisor was lost mid-answer (${message})`, {
    cause: err,
  });
}

/** The whole body of an answer, up to `limit` bytes (the rest is drained and dropped). */
export async function readAll(res: Readable, what: string, limit = Infinity): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      if (size < limit) {
        chunks.push(chunk);
        size += chunk.length;
      }
    }
  } catch (err) {
    throw connectionLost(err, what);
  }
  const all = Buffer.concat(chunks);
  return size > limit ? all.subarray(0, limit) : all;
}

/** A path segment: ids and names are quoted so "a/b" cannot reach another route. */
export function quote(segment: string): string {
  return encodeURIComponent(segment);
}

/** Event streams as frames (docs/api.md): a kind byte, a 4-byte big-endian length, the payload. */
export const FRAMES_TYPE = 'application/vnd.airlock.frames';

async function* ndjson(body: Readable, what: string): AsyncGenerator<JsonObject> {
  body.setEncoding('utf8');
  let pending = '';
  try {
    for await (const chunk of body as AsyncIterable<string>) {
      pending += chunk;
      let eol: number;
      while ((eol = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, eol);
        pending = pending.slice(eol + 1);
        if (line.trim()) yield parseEventLine(line, what);
      }
    }
  } catch (err) {
    throw connectionLost(err, what);
  }
  if (pending.trim()) yield parseEventLine(pending, what);
}

async function* frames(body: Readable, what: string): AsyncGenerator<JsonObject> {
  let pending: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      let at = 0;
      while (pending.length - at >= 5) {
        const size = pending.readUInt32BE(at + 1);
        if (pending.length - at - 5 < size) break;
        const kind = String.fromCharCode(pending[at]!);
        const payload = pending.subarray(at + 5, at + 5 + size);
        at += 5 + size;
        if (kind === 'o' || kind === 'e') {
          yield { type: kind === 'o' ? 'stdout' : 'stderr', bytes: Buffer.from(payload) };
        } else if (kind === 'j') {
          yield parseEventLine(payload.toString('utf8'), what);
        } else {
          throw new SupervisorUnavailableError(`${what}: the supervisor sent a frame of unknown kind '${kind}'`);
        }
      }
      pending = pending.subarray(at);
    }
  } catch (err) {
    if (err instanceof SupervisorUnavailableError) throw err;
    throw connectionLost(err, what);
  }
  if (pending.length)
    throw new SupervisorUnavailableError(`${what}: the stream ended inside a frame (${pending.length} bytes left)`);
}
