// Where the supervisor is: the `url` option if given, else AIRLOCK_URL, else the default socket;
// the token likewise from the `token` option or AIRLOCK_TOKEN. A request without a token on the
// Unix socket is tenant `default` (docs/api.md).

import { ConfigurationError } from './errors.js';

export const DEFAULT_URL = 'unix:///run/airlock/airlock.sock';

/** How to reach a supervisor; every field falls back to the environment. */
export interface ConnectionOptions {
  /**
   * `unix:///path/to.sock`, `http://127.0.0.1:PORT`, or `https://host:PORT` for a supervisor
   * serving TLS (its certificate checked against the system's CAs and NODE_EXTRA_CA_CERTS);
   * default AIRLOCK_URL, then the default socket.
   */
  url?: string;
  /** Bearer token of a tenant; default AIRLOCK_TOKEN. Required over TCP. */
  token?: string;
  /** Seconds an ordinary call (create, list, files...) may take; default 60. */
  requestTimeout?: number;
  /**
   * For an https:// URL: the certificate authority (PEM) that signed the supervisor's
   * certificate, when it is a private one; default the system's (and NODE_EXTRA_CA_CERTS).
   */
  ca?: string | Buffer;
  /**
   * Retries of a request the supervisor turned away (429, 503) or could not be reached for
   * (connection refused or reset; idempotent requests only), with exponential backoff and
   * jitter; `false` turns them off. Default: 3 attempts, 0.2 s doubling up to 5 s.
   */
  retry?: Partial<RetryOptions> | false;
}

/** How often and how long the transport retries (seconds). */
export interface RetryOptions {
  /** Attempts in all, the first included; 1 means no retry. */
  attempts: number;
  /** The wait before the first retry; each next one doubles it, with random jitter. */
  backoff: number;
  /** No single wait is longer; a Retry-After asking for more ends the retries at once. */
  maxBackoff: number;
}

export const DEFAULT_RETRY: RetryOptions = { attempts: 3, backoff: 0.2, maxBackoff: 5 };

/** A parsed supervisor address: a Unix socket path, or a TCP host and port. */
export type Endpoint =
  | { url: string; kind: 'unix'; socketPath: string }
  | { url: string; kind: 'tcp'; host: string; port: number; tls: boolean };

export function parseUrl(url: string): Endpoint {
  if (url.startsWith('unix://')) {
    let path: string;
    try {
      path = decodeURIComponent(url.slice('unix://'.length));
    } catch {
      throw new ConfigurationError(`airlock URL '${url}': bad percent-encoding in the socket path`);
    }
    if (!path.startsWith('/')) {
      throw new ConfigurationError(
        `airlock URL '${url}': a Unix socket URL needs an absolute path, as in ` +
          'unix:///run/airlock/airlock.sock',
      );
    }
    return { url, kind: 'unix', socketPath: path };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigurationError(
      `airlock URL '${url}': expected unix:///path/to.sock, http://127.0.0.1:PORT or https://HOST:PORT`,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigurationError(
      `airlock URL '${url}': expected unix:///path/to.sock, http://127.0.0.1:PORT or https://HOST:PORT ` +
        `(scheme '${parsed.protocol.replace(/:$/, '')}' is not supported)`,
    );
  }
  if (!parsed.hostname) {
    throw new ConfigurationError(`airlock URL '${url}': no host, as in http://127.0.0.1:8080`);
  }
  if ((parsed.pathname !== '' && parsed.pathname !== '/') || parsed.search || parsed.hash) {
    throw new ConfigurationError(
      `airlock URL '${url}': expected only a host and port, got path '${parsed.pathname}${parsed.search}'`,
    );
  }
  if (parsed.username || parsed.password) {
    throw new ConfigurationError(
      `airlock URL '${url}': credentials do not go in the URL; pass the token as AIRLOCK_TOKEN or the token option`,
    );
  }
  // URL keeps IPv6 hosts bracketed ("[::1]"); http.request wants them bare.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const tls = parsed.protocol === 'https:';
  return { url, kind: 'tcp', host, port: parsed.port ? Number(parsed.port) : tls ? 443 : 80, tls };
}

export interface ResolvedConnection {
  endpoint: Endpoint;
  token: string | undefined;
  requestTimeout: number;
  retry: RetryOptions;
  ca: string | Buffer | undefined;
}

export const DEFAULT_REQUEST_TIMEOUT = 60;

export function resolveConnection(options: ConnectionOptions = {}): ResolvedConnection {
  const url = options.url ?? nonEmpty(process.env['AIRLOCK_URL']) ?? DEFAULT_URL;
  const token = options.token ?? nonEmpty(process.env['AIRLOCK_TOKEN']);
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
    throw new ConfigurationError(
      'airlock token: must be printable ASCII without spaces (check AIRLOCK_TOKEN or the token option)',
    );
  }
  const requestTimeout = options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT;
  if (!(requestTimeout > 0)) {
    throw new ConfigurationError(`requestTimeout: must be a positive number of seconds, got ${requestTimeout}`);
  }
  const endpoint = parseUrl(url);
  if (options.ca !== undefined && !(endpoint.kind === 'tcp' && endpoint.tls)) {
    throw new ConfigurationError(`ca: a certificate authority is only used with an https:// URL, not '${url}'`);
  }
  return { endpoint, token, requestTimeout, retry: resolveRetry(options.retry), ca: options.ca };
}

function resolveRetry(retry: Partial<RetryOptions> | false | undefined): RetryOptions {
  if (retry === false) return { ...DEFAULT_RETRY, attempts: 1 };
  const resolved = { ...DEFAULT_RETRY, ...retry };
  if (!Number.isInteger(resolved.attempts) || resolved.attempts < 1) {
    throw new ConfigurationError(`retry.attempts: must be a whole number >= 1, got ${resolved.attempts}`);
  }
  for (const key of ['backoff', 'maxBackoff'] as const) {
    if (!(resolved[key] >= 0) || !Number.isFinite(resolved[key])) {
      throw new ConfigurationError(`retry.${key}: must be a number of seconds >= 0, got ${resolved[key]}`);
    }
  }
  return resolved;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
