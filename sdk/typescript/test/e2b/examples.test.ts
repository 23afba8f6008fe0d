// E2B's documented JavaScript examples (quick start and code interpreter: create, state,
// DataFrame, charts, streaming callbacks, contexts, commands, files, reconnect, timeouts), each
// written as E2B's docs show it with only the import changed, against a real `airlock serve`
// (root; AIRLOCK_BIN names the binary). One supervisor and one shared sandbox for the file.
//
// Where airlock must differ, the test says so in a comment: getHost is awaited (the port link
// is made by the supervisor), and the supervisor's address is passed as `url` because the test
// starts its own (E2B code reads AIRLOCK_URL the same way).

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import {
  CommandExitError,
  FilesystemEventType,
  Sandbox,
  TimeoutError,
  type Execution,
  type FilesystemEvent,
  type OutputMessage,
  type Result,
} from '../../src/e2b/index.js';
import { RealSupervisor, freeLoopbackPort, privilegedRequired, privilegedSkipReason } from '../support/real-supervisor.js';

const skipReason = privilegedSkipReason();

if (skipReason !== undefined && privilegedRequired) {
  it('runs the E2B examples (AIRLOCK_TEST_REQUIRE_PRIVILEGED=1)', () => {
    assert.fail(`cannot run the privileged SDK tests: ${skipReason}`);
  });
}

describe("E2B's documented examples against airlock", { skip: skipReason }, () => {
  let supervisor: RealSupervisor;
  let url: string;
  let sandbox: Sandbox;
  const token = randomBytes(16).toString('hex');
  let tcpUrl: string;

  before(async () => {
    const port = await freeLoopbackPort();
    tcpUrl = `http://127.0.0.1:${port}`;
    supervisor = await RealSupervisor.start(
      `tcp = "127.0.0.1:${port}"\n[tenants.e2b]\ntoken_sha256 = "${createHash('sha256').update(token).digest('hex')}"\n`,
    );
    url = supervisor.url;
    sandbox = await Sandbox.create({ url });
  });

  after(async () => {
    await sandbox?.kill();
    if (supervisor) assert.equal(await supervisor.stop(), 0, supervisor.log());
  });

  it('quick start: create, run, keep state, kill', async () => {
    const sbx = await Sandbox.create({ url });
    await sbx.runCode('x = 1');
    const execution = await sbx.runCode('x+=1; x');
    assert.equal(execution.text, '2');
    const files = await sbx.files.list('/');
    assert.ok(files.some((f) => f.name === 'home'), JSON.stringify(files.map((f) => f.name)));
    await sbx.kill();
    assert.equal(await sbx.isRunning(), false);
  });

  it('hello world: logs as arrays of lines', async () => {
    const execution = await sandbox.runCode('print("hello world")');
    assert.deepEqual(execution.logs, { stdout: ['hello world\n'], stderr: [] });
    assert.equal(execution.error, undefined);
  });

  it('an exception is execution.error with name, value and traceback', async () => {
    const execution = await sandbox.runCode('1 / 0');
    assert.equal(execution.error?.name, 'ZeroDivisionError');
    assert.equal(execution.error?.value, 'division by zero');
    assert.match(execution.error?.traceback ?? '', /ZeroDivisionError/);
  });

  it('a pandas DataFrame comes back as HTML', async () => {
    const execution = await sandbox.runCode(`
import pandas as pd
df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})
df
`);
    const result = execution.results[0]!;
    assert.match(result.html ?? '', /<table/);
    assert.ok(result.formats().includes('html'), String(result.formats()));
    assert.match(result.text ?? '', /a\s+b/);
  });

  it('a matplotlib chart comes back as a base64 PNG', async () => {
    const execution = await sandbox.runCode(`
import matplotlib.pyplot as plt

plt.plot([1, 2, 3, 4])
plt.ylabel('some numbers')
plt.show()
`);
    const firstResult = execution.results[0]!;
    assert.ok(firstResult.png, JSON.stringify(execution.toJSON()).slice(0, 300));
    assert.deepEqual([...Buffer.from(firstResult.png!, 'base64').subarray(1, 4)], [...Buffer.from('PNG')]);
  });

  it('interactive charts: a line chart as chart data', async () => {
    const execution = await sandbox.runCode(`
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 20, 100)
y = np.sin(x)

plt.figure(figsize=(8, 5))
plt.plot(x, y)
plt.title('Plot of sin(x)')
plt.xlabel('x')
plt.ylabel('sin(x)')
plt.show()
`);
    const chart = execution.results[0]?.chart;
    assert.equal(chart?.type, 'line');
    assert.equal(chart?.title, 'Plot of sin(x)');
    assert.equal(chart?.x_label, 'x');
    const [series] = chart!.elements as { points: [number, number][] }[];
    assert.equal(series!.points.length, 100);
  });

  it('interactive charts: a bar chart as chart data', async () => {
    const execution = await sandbox.runCode(`
import matplotlib.pyplot as plt

authors = ['Author A', 'Author B', 'Author C']
sales = [100, 200, 300]
plt.bar(authors, sales, label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')
plt.show()
`);
    const chart = execution.results[0]?.chart;
    assert.equal(chart?.type, 'bar');
    const bars = chart!.elements as { label: string; value: number }[];
    assert.deepEqual(bars.map((b) => [b.label, b.value]), [['Author A', 100], ['Author B', 200], ['Author C', 300]]);
  });

  it('streaming: onStdout and onStderr get output while the code runs, onResult the results', async () => {
    const seen: string[] = [];
    const started = performance.now();
    const times: number[] = [];
    const results: Result[] = [];
    await sandbox.runCode(
      `
import time
import sys
print("This goes first to stdout")
time.sleep(0.3)
print("This goes later to stderr", file=sys.stderr)
time.sleep(0.3)
print("This goes last")
42
`,
      {
        onError: (error) => void seen.push(`error: ${error.name}`),
        onStdout: (data: OutputMessage) => {
          times.push(performance.now() - started);
          seen.push(`stdout: ${data.line.trim()}`);
        },
        onStderr: (data: OutputMessage) => void seen.push(`stderr: ${data.line.trim()} ${data.error}`),
        onResult: (result) => void results.push(result),
      },
    );
    assert.deepEqual(seen, [
      'stdout: This goes first to stdout',
      'stderr: This goes later to stderr true',
      'stdout: This goes last',
    ]);
    // 0.6 s of sleeps lie between the two stdout lines: had the output come at the end, they would
    // arrive together.
    assert.ok(times[1]! - times[0]! >= 250, `stdout arrived as printed, ${times.join(', ')} ms`);
    assert.equal(results[0]?.text, '42');
  });

  it('contexts: isolated state, list, restart and remove', async () => {
    const context = await sandbox.createCodeContext({ language: 'python' });
    await sandbox.runCode('only_here = "in the context"', { context });
    assert.equal((await sandbox.runCode('only_here', { context })).text, "'in the context'");
    assert.equal((await sandbox.runCode('"only_here" in globals()')).text, 'False');
    assert.ok((await sandbox.listCodeContexts()).some((c) => c.id === context.id));
    await sandbox.restartCodeContext(context);
    assert.equal((await sandbox.runCode('"only_here" in globals()', { context })).text, 'False');
    await sandbox.removeCodeContext(context.id);
    assert.ok(!(await sandbox.listCodeContexts()).some((c) => c.id === context.id));
  });

  it('contexts: a working directory of its own', async () => {
    const context = await sandbox.createCodeContext({ cwd: '/tmp', language: 'python' });
    assert.equal(context.cwd, '/tmp');
    assert.equal((await sandbox.runCode('import os; os.getcwd()', { context })).text, "'/tmp'");
    await sandbox.removeCodeContext(context);
  });

  it('JavaScript code in its own context', async () => {
    await sandbox.runCode('const greet = (n) => `hi ${n}`', { language: 'js' });
    const execution = await sandbox.runCode('greet("e2b")', { language: 'js' });
    assert.equal(execution.text, "'hi e2b'");
  });

  it('bash code keeps its directory and variables', async () => {
    await sandbox.runCode('cd /tmp && export GREETING=hello', { language: 'bash' });
    const execution = await sandbox.runCode('echo "$GREETING from $(pwd)"', { language: 'bash' });
    assert.deepEqual(execution.logs.stdout, ['hello from /tmp\n']);
    const failed = await sandbox.runCode('false', { language: 'bash' });
    assert.match(failed.error?.value ?? '', /exit status 1/);
  });

  it('environment variables for one run', async () => {
    const execution = await sandbox.runCode('import os; os.environ.get("MY_VAR")', { envs: { MY_VAR: 'my_value' } });
    assert.equal(execution.text, "'my_value'");
    assert.equal((await sandbox.runCode('import os; os.environ.get("MY_VAR")')).text, undefined);
  });

  it('execution_count counts the runs of a context', async () => {
    const context = await sandbox.createCodeContext();
    const first: Execution = await sandbox.runCode('1', { context });
    const second = await sandbox.runCode('2', { context });
    assert.equal(first.executionCount, 1);
    assert.equal(second.executionCount, 2);
    await sandbox.removeCodeContext(context);
  });

  it('commands: run, stream, a failing one throws CommandExitError', async () => {
    const result = await sandbox.commands.run('ls -l /home');
    assert.equal(result.exitCode, 0);
    assert.match(result.stdout, /user/);
    const lines: string[] = [];
    await sandbox.commands.run('echo hello; sleep 0.2; echo world', { onStdout: (data) => void lines.push(data) });
    assert.equal(lines.join(''), 'hello\nworld\n');
    const env = await sandbox.commands.run('echo $MY_VAR from $(pwd)', { envs: { MY_VAR: '123' }, cwd: '/tmp' });
    assert.equal(env.stdout, '123 from /tmp\n');
    await assert.rejects(sandbox.commands.run('exit 3'), (e: unknown) => e instanceof CommandExitError && e.exitCode === 3);
    await assert.rejects(sandbox.commands.run('whoami', { user: 'root' }), /user 'root' is refused/);
    assert.equal((await sandbox.commands.run('whoami', { user: 'user' })).exitCode, 0);
  });

  it('commands: in the background, with live output, killed', async () => {
    const out: string[] = [];
    const command = await sandbox.commands.run('echo hello; sleep 10; echo world', {
      background: true,
      onStdout: (data) => void out.push(data),
    });
    while (out.length === 0) await new Promise((r) => setTimeout(r, 20));
    assert.equal(out.join(''), 'hello\n');
    assert.ok((await sandbox.commands.list()).some((p) => p.pid === command.pid));
    assert.equal(await command.kill(), true);
    await assert.rejects(command.wait(), CommandExitError);
  });

  it('files: write and read, many at once, list, rename, remove, makeDir', async () => {
    await sandbox.files.write('/home/user/my-file', 'file content');
    assert.equal(await sandbox.files.read('/home/user/my-file'), 'file content');
    await sandbox.files.write([
      { path: '/home/user/a', data: 'A' },
      { path: '/home/user/deep/er/b', data: 'B' },
    ]);
    assert.equal(await sandbox.files.read('/home/user/deep/er/b'), 'B');
    assert.deepEqual([...(await sandbox.files.read('/home/user/a', { format: 'bytes' }))], [0x41]);
    const names = (await sandbox.files.list('/home/user')).map((e) => e.name);
    assert.ok(['my-file', 'a', 'deep'].every((n) => names.includes(n)), String(names));
    assert.equal(await sandbox.files.makeDir('/home/user/made'), true);
    assert.equal(await sandbox.files.makeDir('/home/user/made'), false);
    const moved = await sandbox.files.rename('/home/user/a', '/home/user/made/a');
    assert.equal(moved.path, '/home/user/made/a');
    assert.equal(await sandbox.files.exists('/home/user/a'), false);
    await sandbox.files.remove('/home/user/deep');
    assert.equal(await sandbox.files.exists('/home/user/deep/er/b'), false);
    // What Python wrote is what the files API reads.
    await sandbox.runCode('open("/home/user/from-python.txt", "w").write("py")');
    assert.equal(await sandbox.files.read('/home/user/from-python.txt'), 'py');
  });

  it('files: watchDir sees a write', async () => {
    const dirname = '/home/user/watched';
    await sandbox.files.makeDir(dirname);
    const events: FilesystemEvent[] = [];
    const handle = await sandbox.files.watchDir(dirname, async (event) => {
      events.push(event);
    });
    await sandbox.files.write(`${dirname}/my-file`, 'hello');
    const deadline = Date.now() + 5000;
    while (!events.some((e) => e.type === FilesystemEventType.WRITE) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await handle.stop();
    assert.ok(events.some((e) => e.type === FilesystemEventType.WRITE && e.name === 'my-file'), JSON.stringify(events));
  });

  it('reconnect by sandboxId, state intact', async () => {
    await sandbox.runCode('kept = "still here"');
    const sameSandbox = await Sandbox.connect(sandbox.sandboxId, { url });
    assert.equal(sameSandbox.sandboxId, sandbox.sandboxId);
    assert.equal((await sameSandbox.runCode('kept')).text, "'still here'");
  });

  it('timeouts: a run past timeoutMs throws TimeoutError; the sandbox timeout moves with setTimeout', async () => {
    await assert.rejects(sandbox.runCode('import time; time.sleep(10)', { timeoutMs: 1000 }), TimeoutError);
    assert.equal((await sandbox.runCode('1 + 1')).text, '2');

    const sbx = await Sandbox.create({ url, timeoutMs: 60_000 });
    const info = await sbx.getInfo();
    const lives = info.endAt.getTime() - info.startedAt.getTime();
    assert.ok(lives >= 59_000 && lives <= 61_000, `lives ${lives} ms`);
    await sbx.setTimeout(30_000);
    const left = (await sbx.getInfo()).endAt.getTime() - Date.now();
    assert.ok(left > 25_000 && left <= 31_000, `ends in ${left} ms`);
    await sbx.kill();
  });

  it('getHost: a web server in the sandbox reached through the supervisor', async () => {
    // Over TCP with the tenant's token (E2B's apiKey), as a remote client would.
    const sbx = await Sandbox.create({ url: tcpUrl, apiKey: token });
    try {
      await sbx.commands.run('python3 -m http.server 3000', { background: true });
      await new Promise((r) => setTimeout(r, 500));
      const host = await sbx.getHost(3000);
      const response = await fetch(`http://${host}`);
      assert.equal(response.status, 200);
      assert.match(await response.text(), /Directory listing/);
    } finally {
      await sbx.kill();
    }
  });
});
