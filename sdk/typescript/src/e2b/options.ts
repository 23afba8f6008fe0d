// E2B's options mapped onto airlock's: milliseconds to seconds, templates to profiles, language
// aliases, and the cloud-only options, each accepted with a documented meaning or refused with a
// message that says why — never ignored in a way that changes what the code does.

import { InvalidArgumentError, UnsupportedOptionError } from './errors.js';

/** E2B's `timeoutMs` as whole seconds for the API; undefined (or 0: "no limit") leaves the profile's. */
export function msToSeconds(ms: number | undefined, what: string): number | undefined {
  if (ms === undefined || ms === 0) return undefined;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgumentError(`${what}: must be a number of milliseconds >= 0, got ${JSON.stringify(ms)}`);
  }
  return Math.max(1, Math.ceil(ms / 1000));
}

/**
 * E2B's `user`: "user" is the sandbox's only user; "root" is refused, since a sandbox has no
 * root by design (its processes run as an unprivileged user in a user namespace).
 */
export function checkUser(user: string | undefined, what: string): void {
  if (user === undefined || user === 'user') return;
  if (user === 'root') {
    throw new UnsupportedOptionError(
      `${what}: user 'root' is refused: airlock runs everything in a sandbox as its unprivileged user ('user'), ` +
        'and there is no root to switch to. Leave `user` out, or install what needs root in the profile\'s image',
    );
  }
  throw new InvalidArgumentError(`${what}: unknown user '${user}': an airlock sandbox has one user, 'user'`);
}

/** E2B's template names that mean "the default sandbox": they map to the default profile. */
const DEFAULT_TEMPLATES = new Set(['base', 'code-interpreter-v1', 'code-interpreter']);

/** The airlock profile for an E2B template name; undefined is the policy's default profile. */
export function profileOf(template: string | undefined): string | undefined {
  if (template === undefined || DEFAULT_TEMPLATES.has(template)) return undefined;
  if (typeof template !== 'string' || template === '') {
    throw new InvalidArgumentError(`Sandbox.create: template must be a profile name, got ${JSON.stringify(template)}`);
  }
  return template;
}

/** E2B's language names for runCode and contexts as airlock's. */
export function languageOf(language: string | undefined): string | undefined {
  if (language === undefined) return undefined;
  switch (language.toLowerCase()) {
    case 'js':
    case 'javascript':
      return 'node';
    case 'sh':
    case 'shell':
      return 'bash';
    default:
      return language;
  }
}

/** Options of Sandbox.create and Sandbox.connect (E2B's SandboxOpts), as airlock reads them. */
export interface SandboxOpts {
  /**
   * Milliseconds the sandbox lives from now (E2B's default 300 000, five minutes): airlock's
   * `lifetime_s` (the hard end) and `keep_alive_s` (idle time) both, so idleness does not end it
   * sooner. The profile's `max_lifetime_s` and `max_keep_alive_s` bound it (a 400 says which).
   */
  timeoutMs?: number;
  /** Free-form labels. */
  metadata?: Record<string, string>;
  /** Environment variables of everything run inside. */
  envs?: Record<string, string>;
  /** The tenant's bearer token (airlock's `token`); default AIRLOCK_TOKEN. E2B_API_KEY is never read. */
  apiKey?: string;
  /** The same as apiKey. */
  accessToken?: string;
  /** Milliseconds an ordinary call may take (default 30 000, as E2B's). */
  requestTimeoutMs?: number;
  /** Where the supervisor is: unix:///path.sock, http(s)://host:port; default AIRLOCK_URL. */
  url?: string;
  /** For an https:// `url` signed by a private CA: that CA's certificate (PEM). */
  ca?: string | Buffer;
  /** Accepted; the SDK logs nothing. */
  logger?: unknown;
  /** E2B's `secure` (token-protected sandbox URLs): airlock's port links always carry a token. */
  secure?: boolean;
  /** true (E2B's default) is accepted: network access is the profile's network policy. */
  allowInternetAccess?: boolean;
  /** Refused: see the message. */
  domain?: string;
  debug?: boolean;
  network?: unknown;
  autoPause?: boolean;
  lifecycle?: unknown;
  mcp?: unknown;
  headers?: unknown;
  /** Anything else is refused by name. */
  [key: string]: unknown;
}

const ACCEPTED = new Set([
  'timeoutMs',
  'metadata',
  'envs',
  'apiKey',
  'accessToken',
  'requestTimeoutMs',
  'url',
  'ca',
  'logger',
  'secure',
  'allowInternetAccess',
]);

const REFUSED: Record<string, (value: unknown) => string | undefined> = {
  domain: () =>
    "E2B's cloud domain has no meaning for airlock: pass the supervisor's address as `url` (unix:///path.sock or https://host:port) or AIRLOCK_URL",
  debug: (v) => (v ? 'debug mode talks to a local envd; airlock has none: point `url` at a supervisor instead' : undefined),
  allowInternetAccess: (v) =>
    v === false
      ? "a sandbox's network access is set by its airlock profile ([profiles.X.network] mode); pick a profile whose network mode is none as the template instead"
      : undefined,
  network: () =>
    "per-sandbox egress rules are the airlock profile's network policy (docs/policy.md); pick a profile as the template instead",
  autoPause: (v) => (v ? 'airlock does not pause sandboxes: an idle one ends after its timeout' : undefined),
  lifecycle: () => 'airlock does not pause sandboxes: an idle one ends after its timeout',
  mcp: () => 'airlock does not start MCP servers in sandboxes; `airlock serve` itself serves MCP at /mcp',
  headers: () => 'custom headers are not sent: the supervisor reads only its bearer token',
};

/** Refuses an option airlock cannot honour, naming it and why; undefined options pass. */
export function checkSandboxOpts(opts: SandboxOpts, what: string): void {
  for (const [key, value] of Object.entries(opts)) {
    if (value === undefined) continue;
    const refusal = REFUSED[key]?.(value);
    if (refusal !== undefined) throw new UnsupportedOptionError(`${what}: option '${key}' is not supported: ${refusal}`);
    if (!ACCEPTED.has(key) && !(key in REFUSED)) {
      throw new UnsupportedOptionError(
        `${what}: unknown option '${key}' (airlock's E2B entry point takes ${[...ACCEPTED].join(', ')})`,
      );
    }
  }
}

/** The native connection options of E2B's. */
export function connectionOf(opts: SandboxOpts): {
  url?: string;
  token?: string;
  requestTimeout?: number;
  ca?: string | Buffer;
} {
  const token = opts.apiKey ?? opts.accessToken;
  const requestTimeout = msToSeconds(opts.requestTimeoutMs ?? 30_000, 'requestTimeoutMs');
  return {
    ...(opts.url !== undefined && { url: opts.url }),
    ...(opts.ca !== undefined && { ca: opts.ca }),
    ...(token !== undefined && { token }),
    ...(requestTimeout !== undefined && { requestTimeout }),
  };
}
