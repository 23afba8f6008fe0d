// HTTP/1.1 to the supervisor over a Unix socket or loopback TCP (node:http, keep-alive), with
// JSON calls, event streams (frames, or NDJSON) read as they arrive, and raw bodies streamed
// both ways.

import http from 'node:http';
import { Readable, pipeline } from 'node:stream';

import { resolveConnection, type ConnectionOptions, type Endpoint } from './endpoint.js';
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
  /** Seconds of silence on the connection before giving up; null waits for ever. */
  timeout?: number | null;
  /**
   * Seconds to wait for the answer to start, when that differs from `timeout`: a code run or
   * command the review chain holds for an operator has no answer until it is approved.
   */
  answerTimeout?: number | null;
}

interface OpenOptions extends RequestOptions {
  json?: unknown;
  raw?: Uint8Array | Readable;
  headers?: Record<string, string>;
}

// An error answer larger than this is cut: it is only read for its message.
const ERROR_BODY_LIMIT = 64 * 1024;

/** One supervisor connection pool; closed by `close()` (Sandbox.kill does it). */
export class Transport {
  readonly endpoint: Endpoint;
  readonly requestTimeout: number;
  private readonly token: string | undefined;
  // Keep-alive: a code run right after another reuses the connection. Node unrefs idle pooled
  // sockets, so an idle pool never keeps the process alive.
  private readonly agent = new http.Agent({ keepAlive: true });

  constructor(options: ConnectionOptions = {}) {
    const resolved = resolveConnection(options);
    this.endpoint = resolved.endpoint;
    this.token = resolved.token;
    this.requestTimeout = resolved.requestTimeout;
  }

  /** A JSON call: the decoded answer, or {} for an empty one (204). */
  async json(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<JsonObject> {
    const res = await this.open(method, path, { ...options, json: body });
    const payload = await readAll(res, `${method} ${path}`);
    if (payload.length === 0) return {};
    let decoded: unknown;
    try {
      decoded = JSON.parse(payload.toString('utf8'));
    } catch {
      throw new InternalError(
        `${method} ${path}: the supervisor answered HTTP ${res.statusCode} with a body that is not JSON: ` +
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
    if ((res.headers['content-type'] ?? '').startsWith(FRAMES_TYPE)) {
      yield* frames(res, what);
      return;
    }
    res.setEncoding('utf8');
    let pending = '';
    try {
      for await (const chunk of res as AsyncIterable<string>) {
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

  /** Streams `source` as the request body; the decoded JSON answer. */
  async upload(method: string, path: string, source: UploadSource, options: RequestOptions = {}): Promise<JsonObject> {
    const raw =
      typeof source === 'string' ? Buffer.from(source, 'utf8')
      : source instanceof Uint8Array ? source
      : source instanceof Readable ? source
      : Readable.from(source);
    const res = await this.open(method, path, {
      ...options,
      raw,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    const payload = await readAll(res, `${method} ${path}`);
    try {
      const decoded: unknown = payload.length ? JSON.parse(payload.toString('utf8')) : {};
      return isObject(decoded) ? decoded : {};
    } catch {
      return {};
    }
  }

  /** A raw answer (status < 400), for streamed downloads. */
  download(path: string, options: RequestOptions = {}): Promise<http.IncomingMessage> {
    return this.open('GET', path, options);
  }

  /** Closes the pooled connections. Calls made after this open new ones. */
  close(): void {
    this.agent.destroy();
  }

  private open(method: string, path: string, options: OpenOptions): Promise<http.IncomingMessage> {
    const replayable = !(options.raw instanceof Readable);
    // A pooled connection the supervisor closed while idle fails at once with ECONNRESET; the
    // request never reached it, so one retry on a fresh connection is safe.
    return this.attempt(method, path, options).catch((err: unknown) => {
      if (replayable && err instanceof StaleConnection) return this.attempt(method, path, options);
      throw err instanceof StaleConnection ? err.error : err;
    });
  }

  private attempt(method: string, path: string, options: OpenOptions): Promise<http.IncomingMessage> {
    const what = `${method} ${path}`;
    const query = options.query === undefined ? '' : new URLSearchParams(options.query).toString();
    const headers: Record<string, string | number> = { Accept: 'application/json', ...options.headers };
    if (this.token !== undefined) headers['Authorization'] = `Bearer ${this.token}`;
    let body: Uint8Array | Readable | undefined = options.raw;
    if (options.json !== undefined) {
      body = Buffer.from(JSON.stringify(options.json), 'utf8');
      headers['Content-Type'] = 'application/json';
    }
    if (body instanceof Uint8Array) headers['Content-Length'] = body.byteLength;
    else if (body === undefined && method !== 'GET' && method !== 'HEAD') headers['Content-Length'] = 0;

    const target =
      this.endpoint.kind === 'unix'
        ? { socketPath: this.endpoint.socketPath }
        : { host: this.endpoint.host, port: this.endpoint.port };
    const timeout = options.timeout === undefined ? this.requestTimeout : options.timeout;
    const answerTimeout = options.answerTimeout === undefined ? timeout : options.answerTimeout;

    return new Promise((resolve, reject) => {
      const req = http.request({
        ...target,
        agent: this.agent,
        method,
        path: query ? `${path}?${query}` : path,
        headers,
      });
      let response: http.IncomingMessage | undefined;
      // Socket inactivity, so a long stream that keeps sending is never cut. One listener; the
      // limit in force changes when the answer starts.
      let limit = answerTimeout;
      req.on('timeout', () => {
        const err = new TimeoutError(
          response === undefined
            ? `${what}: the supervisor at ${this.endpoint.url} did not answer within ${limit} s`
            : `${what}: the supervisor at ${this.endpoint.url} sent nothing for ${limit} s`,
        );
        response?.destroy(err); // a reader of the body sees this error, not a bare reset
        req.destroy(err);
      });
      const armTimeout = (seconds: number | null): void => {
        limit = seconds;
        req.setTimeout(seconds === null ? 0 : Math.ceil(seconds * 1000));
      };
      armTimeout(answerTimeout);
      req.on('response', (res) => {
        response = res;
        if (answerTimeout !== timeout) armTimeout(timeout);
        const status = res.statusCode ?? 0;
        if (status < 400) {
          resolve(res);
          return;
        }
        readAll(res, what, ERROR_BODY_LIMIT).then(
          (payload) => reject(errorFromResponse(status, payload, what)),
          () => reject(errorFromResponse(status, Buffer.alloc(0), what)),
        );
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof AirlockError) reject(err);
        else if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
          reject(new StaleConnection(this.connectError(err, what)));
        } else reject(this.connectError(err, what));
      });
      if (body instanceof Readable) {
        // An error answer can arrive before the upload ends (a quota hit): the answer wins, and
        // the broken pipe that follows is only the server having stopped reading.
        pipeline(body, req, () => {});
      } else {
        req.end(body);
      }
    });
  }

  private connectError(err: NodeJS.ErrnoException, what: string): AirlockError {
    const where = this.endpoint.kind === 'unix' ? this.endpoint.socketPath : `${this.endpoint.host}:${this.endpoint.port}`;
    if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
      return new SupervisorUnavailableError(`cannot connect to ${where}: ${err.code} — is airlock serve running?`, {
        cause: err,
      });
    }
    if (err.code === 'EACCES') {
      return new SupervisorUnavailableError(
        `cannot connect to ${where}: EACCES — the socket's mode or group (policy [server] socket_mode, socket_group) does not let this user in`,
        { cause: err },
      );
    }
    return new SupervisorUnavailableError(`${what}: connection to ${where} failed: ${err.message}`, { cause: err });
  }
}

class StaleConnection extends Error {
  constructor(readonly error: AirlockError) {
    super(error.message);
  }
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
export async function readAll(res: http.IncomingMessage, what: string, limit = Infinity): Promise<Buffer> {
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

async function* frames(res: http.IncomingMessage, what: string): AsyncGenerator<JsonObject> {
  let pending: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
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
