// A scripted stand-in for `airlock serve` on a Unix socket in a temp dir (no root needed): each
// test routes the requests it expects to handlers and inspects what the SDK sent.

import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The body decoded as JSON (undefined when empty). */
  json: any;
}

export type Handler = (req: RecordedRequest, res: http.ServerResponse) => void | Promise<void>;

export class FakeSupervisor {
  readonly requests: RecordedRequest[] = [];
  private readonly routes = new Map<string, Handler>();
  private readonly server: http.Server;
  private readonly dir: string | undefined;
  readonly url: string;

  private constructor(server: http.Server, url: string, dir: string | undefined) {
    this.server = server;
    this.url = url;
    this.dir = dir;
  }

  /** Listens on a fresh Unix socket, or on loopback TCP with `tcp: true`. */
  static async start(options: { tcp?: boolean } = {}): Promise<FakeSupervisor> {
    const server = http.createServer();
    let fake: FakeSupervisor;
    if (options.tcp) {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      fake = new FakeSupervisor(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, undefined);
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'airlock-ts-fake-'));
      const socket = join(dir, 'airlock.sock');
      await new Promise<void>((resolve) => server.listen(socket, resolve));
      fake = new FakeSupervisor(server, `unix://${socket}`, dir);
    }
    server.on('request', (req, res) => void fake.dispatch(req, res));
    return fake;
  }

  /** Routes `METHOD /path` (no query) to `handler`; a later call for the same route replaces it. */
  on(method: string, path: string, handler: Handler): this {
    this.routes.set(`${method} ${path}`, handler);
    return this;
  }

  /** The last request to `METHOD /path`. */
  last(method: string, path: string): RecordedRequest {
    const found = this.requests.filter((r) => r.method === method && r.path === path).pop();
    if (!found) throw new Error(`no ${method} ${path} request was made; got ${this.requests.map((r) => `${r.method} ${r.path}`).join(', ')}`);
    return found;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://fake');
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body,
      json: body.length && req.headers['content-type'] === 'application/json' ? JSON.parse(body.toString()) : undefined,
    };
    this.requests.push(recorded);
    const handler = this.routes.get(`${recorded.method} ${recorded.path}`);
    if (!handler) {
      sendJson(res, 404, { error: { code: 'not_found', message: `no route ${recorded.method} ${recorded.path}` } });
      return;
    }
    try {
      await handler(recorded, res);
    } catch (err) {
      if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: String(err) } });
      else res.destroy();
    }
  }
}

export function sendJson(res: http.ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': payload.length }).end(payload);
}

/** Starts an NDJSON answer; `write` sends one event at once (flushed), `end` finishes it. */
export function startNdjson(res: http.ServerResponse): { write(event: unknown): void; end(): void } {
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
  res.flushHeaders();
  return {
    write: (event) => void res.write(`${JSON.stringify(event)}\n`),
    end: () => void res.end(),
  };
}

export function sendNdjson(res: http.ServerResponse, events: unknown[]): void {
  const stream = startNdjson(res);
  for (const e of events) stream.write(e);
  stream.end();
}

/** A sandbox document as the supervisor answers it, with `extra` fields merged in. */
export function sandboxDoc(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: '3f2a9c0d1e4b5a67',
    name: 'analysis-42',
    tenant: 'default',
    profile: 'default',
    language: 'python',
    state: 'running',
    metadata: { user: 'u1' },
    persistent: false,
    created_at: 1795000000000,
    last_active_at: 1795000004000,
    keep_alive_s: 300,
    idle_expires_at: 1795000304000,
    lifetime_s: 3600,
    ends_at: 1795003600000,
    commands_running: 0,
    contexts: 1,
    mounts: [],
    ...extra,
  };
}

/**
 * POST /v1/sandboxes as the supervisor answers it: sandboxDoc(extra) with the requested mounts
 * echoed and their defaults filled (path /mnt/ROOT[/sub/dir], writable false); a source that is
 * not hostdir:, or a path outside /mnt, is a 400 as from the real one.
 */
export function sendCreated(req: RecordedRequest, res: http.ServerResponse, extra: Record<string, unknown> = {}): void {
  const mounts: Record<string, unknown>[] = [];
  for (const m of (req.json?.mounts ?? []) as { source?: string; path?: string; writable?: boolean }[]) {
    const source = m.source ?? '';
    const root = source.startsWith('hostdir:') ? source.slice('hostdir:'.length) : '';
    if (!root) {
      sendJson(res, 400, { error: { code: 'bad_request', message: `mounts: bad source '${source}'` } });
      return;
    }
    const path = m.path ?? `/mnt/${root}`;
    if (!path.startsWith('/mnt/')) {
      sendJson(res, 400, { error: { code: 'bad_request', message: `mounts: path '${path}' is not under /mnt` } });
      return;
    }
    mounts.push({ source, path, writable: m.writable ?? false });
  }
  sendJson(res, 201, sandboxDoc({ ...extra, mounts }));
}
