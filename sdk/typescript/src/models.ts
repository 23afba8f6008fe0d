// What the API answers, as typed values. Every parser tolerates absent fields and ignores
// unknown ones; the answer as sent stays available as `raw`.

import {
  isObject,
  num,
  obj,
  objects,
  optNum,
  optObj,
  optStr,
  str,
  time,
  type JsonObject,
} from './json.js';
import { optAudit, type AuditSummary } from './audit.js';
import { optReview, type Review } from './review.js';

// ---- sandboxes ----

/**
 * A host directory the operator declared ([transfer] roots), shown inside a sandbox
 * (docs/transfer.md, Mounts), as `SandboxInfo.mounts` lists it.
 */
export interface Mount {
  /** "hostdir:ROOT" or "hostdir:ROOT/sub/dir". */
  source: string;
  /** Where the sandbox sees it, under /mnt (default /mnt/ROOT[/sub/dir]). */
  path: string;
  /** False: read-only. */
  writable: boolean;
}

export function parseMount(o: JsonObject): Mount {
  return { source: str(o, 'source'), path: str(o, 'path'), writable: o['writable'] === true };
}

/** A sandbox as `GET /v1/sandboxes/{sb}` answers it. Durations in seconds. */
export interface SandboxInfo {
  id: string;
  /** The fleet node holding it, the prefix of its id (docs/deploy.md); null on a single host. */
  node: string | null;
  /** E2B's name for `id`. */
  sandboxId: string;
  name: string | null;
  tenant: string;
  profile: string;
  language: string | null;
  /** The isolation backend it runs on: "namespaces", "gvisor". */
  isolation: string | null;
  /** "running", "stopping" or "stopped". */
  state: string;
  metadata: Record<string, string>;
  persistent: boolean;
  /** Host directories shown inside, each with its path filled in. */
  mounts: Mount[];
  createdAt: Date | null;
  lastActiveAt: Date | null;
  /** Idle seconds allowed before the sandbox is destroyed (the API's and Python's keep_alive_s). */
  keepAliveS: number | null;
  /** @deprecated the same as keepAliveS; kept for code written before the SDKs agreed on names. */
  keepAlive: number | null;
  idleExpiresAt: Date | null;
  /** Hard end, seconds after creation (lifetime_s). */
  lifetimeS: number | null;
  /** @deprecated the same as lifetimeS. */
  lifetime: number | null;
  endsAt: Date | null;
  commandsRunning: number;
  contexts: number;
  /** What runs now, the longest-running first: {kind: "command"|"code", id, started_at}; null when idle. */
  currentExecution: JsonObject | null;
  /** Executions refused since the sandbox started, by cause ({review: 1}). */
  recentDenials: Record<string, number>;
  raw: JsonObject;
}

/**
 * One sandbox's resource use, as `GET /v1/sandboxes/{sb}/metrics` answers it: read from its
 * cgroup and workspace when asked (docs/api.md, "One sandbox's resource use"). A null limit is
 * unlimited, or not measurable (the disk of a gVisor or microVM sandbox).
 */
export interface SandboxMetrics {
  sandboxId: string;
  cpuSeconds: number;
  memoryBytes: number;
  memoryPeakBytes: number;
  memoryLimitBytes: number | null;
  pids: number;
  pidsLimit: number | null;
  diskBytes: number;
  diskLimitBytes: number | null;
  oomKills: number;
  /** Commands and code runs started in the sandbox. */
  executions: number;
  uptimeS: number;
  sampledAt: Date | null;
  raw: JsonObject;
}

export function parseSandboxMetrics(o: JsonObject): SandboxMetrics {
  const sampled = optStr(o, 'sampled_at');
  const at = sampled === null ? null : new Date(sampled);
  return {
    sandboxId: str(o, 'sandbox_id'),
    cpuSeconds: num(o, 'cpu_seconds'),
    memoryBytes: num(o, 'memory_bytes'),
    memoryPeakBytes: num(o, 'memory_peak_bytes'),
    memoryLimitBytes: optNum(o, 'memory_limit_bytes'),
    pids: num(o, 'pids'),
    pidsLimit: optNum(o, 'pids_limit'),
    diskBytes: num(o, 'disk_bytes'),
    diskLimitBytes: optNum(o, 'disk_limit_bytes'),
    oomKills: num(o, 'oom_kills'),
    executions: num(o, 'executions'),
    uptimeS: num(o, 'uptime_s'),
    sampledAt: at !== null && !Number.isNaN(at.getTime()) ? at : null,
    raw: o,
  };
}

export function parseSandboxInfo(o: JsonObject): SandboxInfo {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(o, 'metadata'))) if (typeof v === 'string') metadata[k] = v;
  const id = str(o, 'id');
  return {
    id,
    sandboxId: id,
    name: optStr(o, 'name') || null,
    tenant: str(o, 'tenant'),
    profile: str(o, 'profile'),
    language: optStr(o, 'language'),
    isolation: optStr(o, 'isolation'),
    node: optStr(o, 'node'),
    state: str(o, 'state'),
    metadata,
    persistent: o['persistent'] === true,
    mounts: objects(o, 'mounts').map(parseMount),
    createdAt: time(o, 'created_at'),
    lastActiveAt: time(o, 'last_active_at'),
    keepAliveS: optNum(o, 'keep_alive_s'),
    keepAlive: optNum(o, 'keep_alive_s'),
    idleExpiresAt: time(o, 'idle_expires_at'),
    lifetimeS: optNum(o, 'lifetime_s'),
    lifetime: optNum(o, 'lifetime_s'),
    endsAt: time(o, 'ends_at'),
    commandsRunning: num(o, 'commands_running'),
    contexts: num(o, 'contexts'),
    currentExecution: optObj(o, 'current_execution'),
    recentDenials: Object.fromEntries(
      Object.entries(obj(o, 'recent_denials')).filter((e): e is [string, number] => typeof e[1] === 'number'),
    ),
    raw: o,
  };
}

// ---- code ----

/** One chunk of a code run's stdout or stderr, as the callbacks receive it (E2B's shape). */
export class OutputMessage {
  constructor(
    /** The text, a chunk as the interpreter flushed it (not always one whole line). */
    readonly line: string,
    /** True for stderr. */
    readonly error: boolean,
    readonly timestamp: Date,
  ) {}

  toString(): string {
    return this.line;
  }
}

const RESULT_FORMATS = {
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
} as const;

/** The MIME type under which a Python context describes a matplotlib figure (docs/api.md). */
export const CHART_MIME = 'application/vnd.airlock.chart+json';

type FormatName = (typeof RESULT_FORMATS)[keyof typeof RESULT_FORMATS];

/** One series point of a line or scatter chart: [x, y] (numbers, or strings for dates and categories). */
export type ChartPoint = [number | string, number | string];

export interface PointElement {
  label: string;
  points: ChartPoint[];
}

export interface BarElement {
  label: string;
  group: string;
  value: number;
}

export interface PieElement {
  label: string;
  angle: number;
  radius: number;
}

export interface BoxAndWhiskerElement {
  label: string;
  min: number;
  first_quartile: number;
  median: number;
  third_quartile: number;
  max: number;
  outliers: number[];
}

/**
 * A matplotlib figure's data as the supervisor sends it (field names as on the wire, as E2B's
 * are): `type` says which element shape `elements` holds; a "superchart" holds charts.
 */
export interface Chart {
  type: 'line' | 'scatter' | 'bar' | 'pie' | 'box_and_whisker' | 'superchart' | 'unknown';
  title: string | null;
  elements: (PointElement | BarElement | PieElement | BoxAndWhiskerElement | Chart)[];
  x_label?: string | null;
  y_label?: string | null;
  x_unit?: string | null;
  y_unit?: string | null;
  x_ticks?: (number | string)[];
  x_tick_labels?: string[];
  x_scale?: string;
  y_ticks?: (number | string)[];
  y_tick_labels?: string[];
  y_scale?: string;
  [key: string]: unknown;
}

/**
 * A rich value from a code run: the last expression's value (`isMainResult`) or a display (every
 * matplotlib figure open at the end of a Python run comes back as one, with `png`).
 *
 * `png`, `jpeg` and `pdf` are base64 strings as the API sends them (E2B's shape); `pngBuffer`
 * and friends decode them. `json` is the decoded value; the other formats are strings. `raw` is
 * the MIME bundle as sent; `extra` holds the MIME types without a property of their own.
 */
export class Result {
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  latex?: string;
  json?: unknown;
  javascript?: string;
  /**
   * The figure's data when the result is a matplotlib figure, in E2B's chart shape: `type`
   * ("line", "scatter", "bar", "pie", "box_and_whisker", "superchart", "unknown"), `title`,
   * `elements`, and for 2-D charts the axis labels, units, ticks and scales.
   */
  chart?: Chart;
  /**
   * A table's data as pandas' table schema (`application/vnd.dataresource+json`), when the
   * interpreter sends one (pandas does with display.html.table_schema on).
   */
  data?: Record<string, unknown>;
  readonly extra: Record<string, unknown> = {};

  constructor(
    readonly raw: JsonObject,
    readonly isMainResult: boolean,
  ) {
    for (const [mime, value] of Object.entries(raw)) {
      if (mime === 'text/plain') {
        this.text = typeof value === 'string' ? value : JSON.stringify(value);
        continue;
      }
      if (mime === CHART_MIME) {
        const chart = typeof value === 'string' ? parseJsonOr(value) : value;
        if (isObject(chart)) this.chart = chart as unknown as Chart;
        continue;
      }
      if (mime === 'application/vnd.dataresource+json') {
        const data = typeof value === 'string' ? parseJsonOr(value) : value;
        if (isObject(data)) this.data = data;
        continue;
      }
      const name: FormatName | undefined = (RESULT_FORMATS as Record<string, FormatName>)[mime];
      if (name === undefined) this.extra[mime] = value;
      else if (name === 'json') this.json = typeof value === 'string' ? parseJsonOr(value) : value;
      else if (typeof value === 'string') this[name] = value;
    }
  }

  /** The PNG image's bytes, decoded from `png`. */
  get pngBuffer(): Buffer | undefined {
    return this.png === undefined ? undefined : Buffer.from(this.png, 'base64');
  }

  get jpegBuffer(): Buffer | undefined {
    return this.jpeg === undefined ? undefined : Buffer.from(this.jpeg, 'base64');
  }

  get pdfBuffer(): Buffer | undefined {
    return this.pdf === undefined ? undefined : Buffer.from(this.pdf, 'base64');
  }

  /** The formats present besides `text`, as E2B lists them: "html", "png", ... */
  formats(): string[] {
    const present: string[] = Object.values(RESULT_FORMATS).filter((name) => this[name] !== undefined);
    if (this.chart !== undefined) present.push('chart');
    if (this.data !== undefined) present.push('data');
    return [...present, ...Object.keys(this.extra)];
  }

  toString(): string {
    return this.text ?? '';
  }

  toJSON(): JsonObject {
    return { ...this.raw };
  }
}

/** An exception raised by the code (or the interpreter dying). */
export class ExecutionError {
  constructor(
    /** The exception's type, e.g. "ZeroDivisionError". */
    readonly name: string,
    /** Its message. */
    readonly value: string,
    /** The formatted traceback, one string. */
    readonly traceback: string,
  ) {}

  get tracebackLines(): string[] {
    return this.traceback ? this.traceback.split('\n') : [];
  }

  toString(): string {
    return `${this.name}: ${this.value}`;
  }

  static fromEvent(event: JsonObject): ExecutionError {
    const tb = event['traceback'];
    const traceback = Array.isArray(tb) ? tb.map(String).join('\n') : typeof tb === 'string' ? tb : '';
    return new ExecutionError(str(event, 'name', 'Error'), str(event, 'value'), traceback);
  }
}

/** The chunks a code run wrote to stdout and stderr, in order. */
export interface Logs {
  stdout: string[];
  stderr: string[];
}

/**
 * The outcome of `Sandbox.runCode`. An exception in the code is `error` (it does not throw);
 * `status` is the supervisor's: "ok", "error", "timeout" or "context_lost".
 */
export class Execution {
  readonly results: Result[] = [];
  readonly logs: Logs = { stdout: [], stderr: [] };
  error: ExecutionError | undefined;
  status = '';
  durationMs: number | null = null;
  contextId: string | null = null;
  contextRestarted = false;
  /** The run's number in its context, as Jupyter's In [N]; null when the supervisor sends none. */
  executionCount: number | null = null;
  /** The review chain's verdict, when the supervisor reports one. */
  review: Review | null = null;
  /** The execution's audit summary; null when the profile audits nothing. */
  audit: AuditSummary | null = null;
  /** The `end` event as sent, unknown fields included. */
  rawEnd: JsonObject = {};
  /**
   * A run taken over from a supervisor that died (Sandbox.recoveredRun): its
   * "supervisor_restart" event, with held_bytes and dropped_bytes. Undefined for other runs.
   */
  restart?: JsonObject;

  /** The text of the main result (the value of the last expression), if any. */
  get text(): string | undefined {
    for (let i = this.results.length - 1; i >= 0; i--) {
      const result = this.results[i]!;
      if (result.isMainResult) return result.text;
    }
    return undefined;
  }

  get stdout(): string {
    return this.logs.stdout.join('');
  }

  get stderr(): string {
    return this.logs.stderr.join('');
  }

  toJSON(): JsonObject {
    return {
      results: this.results.map((r) => r.toJSON()),
      logs: this.logs,
      error: this.error && { name: this.error.name, value: this.error.value, traceback: this.error.traceback },
      status: this.status,
      durationMs: this.durationMs,
      contextId: this.contextId,
      contextRestarted: this.contextRestarted,
      executionCount: this.executionCount,
    };
  }
}

/** A stateful interpreter inside a sandbox. */
export interface Context {
  id: string;
  language: string;
  /** Its working directory (default /home/user); null when the supervisor does not say. */
  cwd: string | null;
  state: string;
  createdAt: Date | null;
  runs: number;
  raw: JsonObject;
}

export function parseContext(o: JsonObject): Context {
  return {
    id: str(o, 'context_id'),
    language: str(o, 'language'),
    cwd: optStr(o, 'cwd'),
    state: str(o, 'state'),
    createdAt: time(o, 'created_at'),
    runs: num(o, 'runs'),
    raw: o,
  };
}

// ---- commands ----

/**
 * A finished command. `exitCode` is null when a signal ended it (`signal` says which) or the
 * supervisor could not learn its end (`error` says why). A non-zero exit does not throw.
 */
export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  commandId: string;
  pid: number | null;
  signal: number | null;
  timedOut: boolean;
  error: string | null;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  durationMs: number | null;
  review: Review | null;
  /** The execution's audit summary; null when the profile audits nothing. */
  audit: AuditSummary | null;
  /** The `exit` event as sent. */
  rawExit: JsonObject;
}

export function parseExit(
  exit: JsonObject,
  output: { stdout: string; stderr: string; commandId: string; pid: number | null; errors: string[] },
): CommandResult {
  const signal = optNum(exit, 'signal');
  const error = optStr(exit, 'error') ?? (output.errors.length ? output.errors.join('; ') : null);
  return {
    exitCode: optNum(exit, 'exit_code'),
    stdout: output.stdout,
    stderr: output.stderr,
    commandId: output.commandId,
    pid: output.pid,
    signal: signal === 0 ? null : signal,
    timedOut: exit['timed_out'] === true,
    error,
    stdoutTruncated: exit['stdout_truncated'] === true,
    stderrTruncated: exit['stderr_truncated'] === true,
    durationMs: optNum(exit, 'duration_ms'),
    review: optReview(exit),
    audit: optAudit(exit),
    rawExit: exit,
  };
}

/** A command as `GET /v1/sandboxes/{sb}/commands` lists it. */
export interface CommandInfo {
  id: string;
  /** The same as `id`, under the API's (and Python's) name. */
  commandId: string;
  argv: string[];
  pid: number | null;
  /** "running" or "exited". */
  state: string;
  background: boolean;
  startedAt: Date | null;
  exitCode: number | null;
  signal: number | null;
  raw: JsonObject;
}

export function parseCommandInfo(o: JsonObject): CommandInfo {
  const argv = o['argv'];
  return {
    id: str(o, 'command_id'),
    commandId: str(o, 'command_id'),
    argv: Array.isArray(argv) ? argv.filter((a): a is string => typeof a === 'string') : [],
    pid: optNum(o, 'pid'),
    state: str(o, 'state'),
    background: o['background'] === true,
    startedAt: time(o, 'started_at'),
    exitCode: optNum(o, 'exit_code'),
    signal: optNum(o, 'signal'),
    raw: o,
  };
}

// ---- files ----

export type FileType = 'file' | 'dir' | 'symlink' | 'other';

/** A file, directory or link inside the sandbox. */
export interface EntryInfo {
  name: string;
  type: FileType;
  path: string;
  size: number;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  modifiedTime: Date | null;
  raw: JsonObject;
}

export function parseEntry(o: JsonObject, directory?: string): EntryInfo {
  let name = str(o, 'name');
  let path = str(o, 'path');
  if (!path && directory !== undefined) path = `${directory.replace(/\/+$/, '')}/${name}`;
  if (!name && path) name = path.replace(/\/+$/, '').split('/').pop() ?? '';
  const type = str(o, 'type', 'other');
  const rawMode = o['mode'];
  const mode =
    typeof rawMode === 'number' ? rawMode
    : typeof rawMode === 'string' && /^[0-7]+$/.test(rawMode) ? parseInt(rawMode, 8)
    : 0;
  return {
    name,
    type: type === 'file' || type === 'dir' || type === 'symlink' ? type : 'other',
    path,
    size: num(o, 'size'),
    mode,
    modifiedTime: time(o, 'mtime_ms'),
    raw: o,
  };
}

export function parseEntries(answer: JsonObject, directory: string): EntryInfo[] {
  return objects(answer, 'entries').map((e) => parseEntry(e, directory));
}

/** A file written by `files.write`. */
export interface WriteInfo {
  path: string;
  name: string;
  size: number;
}

export function parseWriteInfo(o: JsonObject, path: string): WriteInfo {
  const written = str(o, 'path', path);
  return { path: written, name: written.replace(/\/+$/, '').split('/').pop() ?? '', size: num(o, 'size') };
}

function parseJsonOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ---- transfers ----

/**
 * One transfer as the supervisor records it (docs/transfer.md, The record): an archive moved into
 * a sandbox directory (`direction` "in") or a directory packed out ("out"). `status` is "ok",
 * "error", "denied" (a rule refused it before any byte moved), "cancelled", or "running" in
 * listTransfers while it runs; `error` names the entry, URL or rule that was wrong.
 */
export interface TransferRecord {
  id: string;
  direction: string;
  /** "http", "hostdir", "archive"; "upload" / "download" for the archive routes. */
  plugin: string;
  /** The source or destination with credentials removed. */
  location: string;
  sandboxPath: string;
  files: number;
  dirs: number;
  links: number;
  /** Unpacked (in) or packed (out) bytes. */
  bytes: number;
  /** The archive's bytes that crossed. */
  archiveBytes: number;
  sha256: string | null;
  ms: number | null;
  status: string;
  error: string | null;
  /** The review chain's verdict on the transfer, when the profile reviews transfers. */
  review: Review | null;
  raw: JsonObject;
}

export function parseTransfer(o: JsonObject): TransferRecord {
  return {
    id: str(o, 'id'),
    direction: str(o, 'direction'),
    plugin: str(o, 'plugin'),
    location: str(o, 'location'),
    sandboxPath: str(o, 'sandbox_path'),
    files: num(o, 'files'),
    dirs: num(o, 'dirs'),
    links: num(o, 'links'),
    bytes: num(o, 'bytes'),
    archiveBytes: num(o, 'archive_bytes'),
    sha256: optStr(o, 'sha256'),
    ms: optNum(o, 'ms'),
    status: str(o, 'status'),
    error: optStr(o, 'error'),
    review: optReview(o),
    raw: o,
  };
}

/** A `progress` event of a running transfer, about four a second. */
export interface TransferProgress {
  transferId: string;
  /** Archive bytes moved so far. */
  bytes: number;
  /** Average bytes per second since the start. */
  rateBps: number;
}

export function parseTransferProgress(event: JsonObject): TransferProgress {
  return { transferId: str(event, 'transfer_id'), bytes: num(event, 'bytes'), rateBps: num(event, 'rate_bps') };
}
