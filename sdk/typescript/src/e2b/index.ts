// airlock's E2B-compatible entry point: E2B code-interpreter code runs against an airlock
// supervisor with only its import changed.
//
//   import { Sandbox } from '@airlock-sandbox/sdk/e2b'; // was '@e2b/code-interpreter'
//   const sbx = await Sandbox.create();
//   await sbx.runCode('x = 1');
//   const execution = await sbx.runCode('x+=1; x');
//   console.log(execution.text); // 2
//
// The supervisor is found as by the native SDK (AIRLOCK_URL, AIRLOCK_TOKEN, or the `url` and
// `apiKey` options). docs/e2b.md (its TypeScript section) lists what maps to what and what is refused.

import { Sandbox } from './sandbox.js';

export {
  HostPromise,
  OutputMessage,
  Sandbox,
  SandboxPaginator,
  type Context,
  type CreateCodeContextOpts,
  type RunCodeOpts,
  type SandboxInfo,
  type SandboxMetrics,
} from './sandbox.js';
export { type SandboxOpts } from './options.js';
export {
  CommandHandle,
  Commands,
  type CommandConnectOpts,
  type CommandStartOpts,
  type ProcessInfo,
} from './commands.js';
export {
  FileType,
  Filesystem,
  FilesystemEventType,
  type EntryInfo,
  type FilesystemEvent,
  type FilesystemRequestOpts,
  type WatchHandle,
  type WatchOpts,
  type WriteEntry,
  type WriteInfo,
} from './filesystem.js';
export {
  AuthenticationError,
  CommandExitError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  TimeoutError,
  UnsupportedOptionError,
  type CommandResult,
} from './errors.js';
export {
  Execution,
  ExecutionError,
  Result,
  type BarElement,
  type BoxAndWhiskerElement,
  type Chart,
  type ChartPoint,
  type Logs,
  type PieElement,
  type PointElement,
} from '../models.js';

/** E2B's name for a chart's kind. */
export const ChartType = {
  LINE: 'line',
  SCATTER: 'scatter',
  BAR: 'bar',
  PIE: 'pie',
  BOX_AND_WHISKER: 'box_and_whisker',
  SUPERCHART: 'superchart',
  UNKNOWN: 'unknown',
} as const;

/** `import Sandbox from '@airlock-sandbox/sdk/e2b'`, as E2B's default export. */
export default Sandbox;
