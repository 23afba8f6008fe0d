// A real `airlock serve` for the integration tests: the binary from AIRLOCK_BIN, a temp socket,
// a temp policy and temp state dirs; stopped with SIGTERM (which drains and destroys its
// sandboxes) and waited for, by pid.

import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Why the privileged tests cannot run here, or undefined when they can. With
 * AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 the caller turns a reason into a failure instead of a skip.
 */
export function privilegedSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root: airlock serve creates namespaces, cgroups and mounts';
  const bin = process.env['AIRLOCK_BIN'];
  if (!bin) return 'AIRLOCK_BIN is not set: point it at the airlock binary (ctest sets it to build/bin/airlock)';
  if (!existsSync(bin)) return `AIRLOCK_BIN=${bin} does not exist: build the airlock target first`;
  return undefined;
}

export const privilegedRequired = process.env['AIRLOCK_TEST_REQUIRE_PRIVILEGED'] === '1';

export class RealSupervisor {
  private constructor(
    readonly url: string,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly logPath: string,
  ) {}

  /** Starts `airlock serve` and resolves once GET /healthz answers 200. */
  static async start(extraPolicy = ''): Promise<RealSupervisor> {
    const bin = process.env['AIRLOCK_BIN']!;
    const dir = mkdtempSync(join(tmpdir(), 'airlock-ts-sdk-'));
    // mkdtemp makes it 0700; sandboxes reach their scratch directory under it as their own uid.
    chmodSync(dir, 0o755);
    const socket = join(dir, 'airlock.sock');
    const policy = join(dir, 'policy.toml');
    writeFileSync(
      policy,
      `schema = 1\n[server]\nsocket = "${socket}"\nstate_dir = "${join(dir, 'state')}"\n${extraPolicy}`,
    );
    const logPath = join(dir, 'serve.log');
    const log = openSync(logPath, 'w');
    const child = spawn(bin, ['serve', '--policy', policy, '--state-dir', join(dir, 'run')], {
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    const supervisor = new RealSupervisor(`unix://${socket}`, dir, child, logPath);
    const deadline = Date.now() + 30_000;
    while (!(await healthy(socket))) {
      if (child.exitCode !== null || child.signalCode !== null) {
        const output = supervisor.log();
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`airlock serve exited early (${child.exitCode ?? child.signalCode}):\n${output}`);
      }
      if (Date.now() > deadline) {
        await supervisor.stop();
        throw new Error(`airlock serve did not answer /healthz within 30 s:\n${supervisor.log()}`);
      }
      await sleep(20);
    }
    return supervisor;
  }

  get pid(): number {
    return this.child.pid!;
  }

  log(): string {
    try {
      return readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  /** SIGTERM, then waits for the exit; SIGKILL (to this pid only) if it has not ended in 60 s. */
  async stop(): Promise<number | null> {
    // The timer is unref'd: a pending one must not hold the test process open after the exit.
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.kill('SIGTERM');
      const inTime = await Promise.race([exited.then(() => true), sleep(60_000, undefined, { ref: false }).then(() => false)]);
      if (!inTime) {
        this.child.kill('SIGKILL');
        await exited;
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
    return this.child.exitCode;
  }
}

function healthy(socketPath: string): Promise<boolean> {
  if (!existsSync(socketPath)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/healthz', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.setTimeout(2000, () => req.destroy());
  });
}

/** A loopback TCP port that was free a moment ago (the kernel picks it). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
