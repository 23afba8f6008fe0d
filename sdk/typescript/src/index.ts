// airlock: run AI-agent code in airlock sandboxes from TypeScript / JavaScript.
//
//   import { Sandbox } from '@airlock-sandbox/sdk';
//   await using sbx = await Sandbox.create();
//   const execution = await sbx.runCode('x = 41\nx + 1');
//   console.log(execution.text); // 42
//
// The supervisor is found through AIRLOCK_URL (unix:///path.sock or http://127.0.0.1:PORT) and
// AIRLOCK_TOKEN, or the `url` / `token` options; the default is unix:///run/airlock/airlock.sock.

export { Sandbox, type ListOptions, type MountSpec, type SandboxOptions } from './sandbox.js';
export {
  type CodeRunner,
  type ContextRef,
  type CreateContextOptions,
  type ErrorHandler,
  type OutputHandler,
  type ResultHandler,
  type RunCodeOptions,
} from './code.js';
export {
  CommandHandle,
  type CommandOptions,
  type CommandOutput,
  type CommandOutputHandler,
  type Commands,
  type RunOptions,
} from './commands.js';
export { type Files, type ReadFormat, type WriteOptions } from './files.js';
export { DEFAULT_URL, parseUrl, type ConnectionOptions, type Endpoint } from './endpoint.js';
export {
  AirlockError,
  AuthenticationError,
  ConfigurationError,
  ConflictError,
  DeniedByReview,
  ForbiddenError,
  InternalError,
  InvalidRequestError,
  NotFoundError,
  QuotaExceededError,
  SupervisorUnavailableError,
  TimeoutError,
  TransferError,
  type AirlockErrorDetails,
} from './errors.js';
export {
  CHART_MIME,
  Execution,
  ExecutionError,
  OutputMessage,
  Result,
  type BarElement,
  type BoxAndWhiskerElement,
  type Chart,
  type ChartPoint,
  type CommandInfo,
  type CommandResult,
  type Context,
  type EntryInfo,
  type FileType,
  type Logs,
  type Mount,
  type PieElement,
  type PointElement,
  type SandboxInfo,
  type SandboxMetrics,
  type TransferProgress,
  type TransferRecord,
  type WriteInfo,
} from './models.js';
export {
  type ArchiveFormat,
  type ArchiveSource,
  type DownloadArchiveOptions,
  type TransferOptions,
  type TransferProgressHandler,
} from './transfers.js';
export { type AuditConnection, type AuditProcess, type AuditSummary } from './audit.js';
export { type Review } from './review.js';
export { type UploadSource } from './transport.js';
