// The SDK against a real `airlock serve` (root; AIRLOCK_BIN names the binary). One supervisor for
// the file, started with a temp policy and stopped with SIGTERM at the end; every sandbox a test
// makes is killed by that test.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';

import { AuthenticationError, NotFoundError, Sandbox, TimeoutError, type OutputMessage } from '../../src/index.js';
import { RealSupervisor, freeLoopbackPort, privilegedRequired, privilegedSkipReason } from '../support/real-supervisor.js';

const skipReason = privilegedSkipReason();

if (skipReason !== undefined && privilegedRequired) {
  it('runs the integration tests (AIRLOCK_TEST_REQUIRE_PRIVILEGED=1)', () => {
    assert.fail(`cannot run the privileged SDK tests: ${skipReason}`);
  });
}

describe('against a real airlock serve', { skip: skipReason }, () => {
  let supervisor: RealSupervisor;
  let sbx: Sandbox;
  const meta = { suite: `ts-sdk-${process.pid}` };

  // Loopback TCP needs a tenant with a token; the Unix socket without one is tenant `default`.
  const token = randomBytes(16).toString('hex');
  let tcpUrl: string;

  before(async () => {
    const port = await freeLoopbackPort();
    tcpUrl = `http://127.0.0.1:${port}`;
    supervisor = await RealSupervisor.start(
      `tcp = "127.0.0.1:${port}"\n[tenants.agents]\ntoken_sha256 = "${createHash('sha256').update(token).digest('hex')}"\n`,
    );
    const started = performance.now();
    sbx = await Sandbox.create({
      url: supervisor.url,
      language: 'python',
      name: `ts-sdk-${process.pid}`,
      envs: { GREETING: 'hello from the SDK', MPLBACKEND: 'Agg' },
      metadata: meta,
    });
    console.log(`# create: ${(performance.now() - started).toFixed(1)} ms`);
  });

  after(async () => {
    await sbx?.kill();
    if (supervisor) {
      const code = await supervisor.stop();
      assert.equal(code, 0, `airlock serve did not exit cleanly on SIGTERM:\n${supervisor.log()}`);
    }
  });

  it('connects by name and lists by metadata', async () => {
    const again = await Sandbox.connect(sbx.name!, { url: supervisor.url });
    assert.equal(again.id, sbx.id);
    assert.match(sbx.id, /^[0-9a-f]{16}$/);
    const info = await again.getInfo();
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, meta);
    const listed = await Sandbox.list({ url: supervisor.url, metadata: meta });
    assert.deepEqual(listed.map((s) => s.id), [sbx.id]);
    assert.deepEqual(await Sandbox.list({ url: supervisor.url, metadata: { suite: 'someone-else' } }), []);
  });

  it('keeps state across runCode calls, with the sandbox env', async () => {
    await sbx.runCode('x = 41');
    const started = performance.now();
    const execution = await sbx.runCode('x + 1');
    console.log(`# runCode round trip (x + 1): ${(performance.now() - started).toFixed(1)} ms`);
    assert.equal(execution.text, '42');
    assert.equal(execution.error, undefined);
    assert.equal(execution.status, 'ok');
    assert.equal((await sbx.runCode('import os\nos.environ["GREETING"]')).text, "'hello from the SDK'");
  });

  it('streams stdout to onStdout while the code runs', async () => {
    const chunks: Array<{ at: number; line: string }> = [];
    const started = performance.now();
    const execution = await sbx.runCode('import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)', {
      onStdout: (m: OutputMessage) => void chunks.push({ at: performance.now() - started, line: m.line }),
    });
    const total = performance.now() - started;
    assert.equal(execution.stdout, '0\n1\n2\n');
    assert.ok(chunks.length >= 2, `expected the output in several chunks, got ${JSON.stringify(chunks)}`);
    assert.ok(chunks[0]!.at < total - 500, `the first chunk came at ${chunks[0]!.at} ms of ${total} ms: not live`);
  });

  it('returns a matplotlib figure as a PNG without savefig', async () => {
    const execution = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("t")');
    const images = execution.results.filter((r) => r.png !== undefined);
    assert.equal(images.length, 1, `results: ${JSON.stringify(execution.results.map((r) => r.formats()))}`);
    const png = images[0]!.pngBuffer!;
    assert.ok(png.length > 1000);
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.ok(images[0]!.formats().includes('png'));
  });

  it('reports an exception with its traceback, without throwing', async () => {
    const errors: string[] = [];
    const execution = await sbx.runCode('def f():\n    return 1 / 0\nf()', { onError: (e) => void errors.push(e.name) });
    assert.equal(execution.error?.name, 'ZeroDivisionError');
    assert.match(execution.error!.value, /division by zero/);
    assert.match(execution.error!.traceback, /f\(\)/);
    assert.deepEqual(errors, ['ZeroDivisionError']);
    assert.equal((await sbx.runCode('x')).text, '41', 'the context survives an exception');
  });

  it('interrupts a run past its timeout and keeps the context', async () => {
    const started = performance.now();
    await assert.rejects(sbx.runCode('print("before", flush=True)\nimport time\ntime.sleep(60)', { timeout: 1 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutError, String(e));
      assert.equal(e.execution?.stdout, 'before\n');
      return true;
    });
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 15_000, `the timeout took ${elapsed} ms`);
    assert.equal((await sbx.runCode('x')).text, '41');
  });

  it('runs Node code in a context of its own, and restarts a context', async () => {
    const ctx = await sbx.createCodeContext({ language: 'node' });
    assert.equal(ctx.language, 'node');
    assert.equal((await sbx.runCode('const y = 6; y * 7', { context: ctx })).text, '42');
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    const py = await sbx.createCodeContext();
    await sbx.runCode('z = 1', { context: py });
    await sbx.restartCodeContext(py);
    const after = await sbx.runCode('z', { context: py });
    assert.equal(after.error?.name, 'NameError', 'a restarted context forgets its variables');
  });

  it('runs commands: exit codes, streaming, stdin', async () => {
    const result = await sbx.commands.run('echo hi; echo err >&2; exit 3');
    assert.deepEqual([result.exitCode, result.stdout, result.stderr], [3, 'hi\n', 'err\n']);
    const argv = await sbx.commands.run(['printf', '%s|', 'a b', 'c'], { cwd: '/tmp', envs: { K: 'v' } });
    assert.equal(argv.stdout, 'a b|c|');
    assert.equal((await sbx.commands.run('pwd; echo $K', { cwd: '/tmp', envs: { K: 'v' } })).stdout, '/tmp\nv\n');
    assert.equal((await sbx.commands.run('tr a-z A-Z', { stdin: 'shout\n' })).stdout, 'SHOUT\n');

    const chunks: number[] = [];
    const started = performance.now();
    await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.4; done', { onStdout: () => void chunks.push(performance.now() - started) });
    const total = performance.now() - started;
    assert.ok(chunks.length >= 2 && chunks[0]! < total - 500, `chunks at ${chunks} of ${total} ms: not live`);

    await assert.rejects(sbx.commands.run('sleep 30', { timeout: 1 }), (e: unknown) => e instanceof TimeoutError && e.result?.timedOut === true);
  });

  it('runs background commands: stdin, wait, list, connect, kill', async () => {
    const cat = await sbx.commands.run('cat', { background: true });
    assert.ok(cat.pid !== null && cat.pid > 0);
    await cat.sendStdin('hello\n');
    await cat.sendStdin(Buffer.from('bytes\n'));
    await cat.closeStdin();
    const catResult = await cat.wait();
    assert.equal(catResult.stdout, 'hello\nbytes\n');
    assert.equal(catResult.exitCode, 0);

    const sleeper = await sbx.commands.run(['sleep', '60'], { background: true });
    const listed = await sbx.commands.list();
    assert.ok(listed.some((c) => c.id === sleeper.id && c.state === 'running'), JSON.stringify(listed));
    const attached = await sbx.commands.connect(sleeper.id);
    assert.equal(attached.pid, sleeper.pid);
    const waiting = attached.wait();
    await sleep(100);
    assert.equal(await sleeper.kill(), true);
    const killed = await waiting;
    assert.equal(killed.exitCode, null);
    assert.equal(killed.signal, 9);

    const ticker = await sbx.commands.run('for i in 1 2; do echo tick $i; done', { background: true });
    const seen: string[] = [];
    for await (const chunk of ticker) seen.push(chunk.data);
    assert.equal(seen.join(''), 'tick 1\ntick 2\n');
    assert.equal((await ticker.wait()).exitCode, 0);

    const term = await sbx.commands.run('trap "echo got TERM; exit 7" TERM; while :; do sleep 0.05; done', { background: true });
    await sleep(300);
    await term.signal('SIGTERM');
    const termResult = await term.wait();
    assert.equal(termResult.exitCode, 7);
    assert.equal(termResult.stdout, 'got TERM\n');
  });

  it('round-trips files, a multi-MB binary included', async () => {
    assert.equal(await sbx.files.makeDir('notes'), true);
    await sbx.files.write('notes/a.txt', 'h\u00e9llo\n');
    assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'h\u00e9llo\n');

    const blob = randomBytes(6 * 1024 * 1024);
    const chunks = Array.from({ length: 6 }, (_, i) => blob.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024));
    let started = performance.now();
    const written = await sbx.files.write('/home/user/blob.bin', Readable.from(chunks), { mode: 0o600 });
    const upMs = performance.now() - started;
    assert.equal(written.size, blob.length);
    started = performance.now();
    const back = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' });
    const downMs = performance.now() - started;
    console.log(`# 6 MiB upload ${upMs.toFixed(1)} ms, download ${downMs.toFixed(1)} ms`);
    assert.ok(back.equals(blob), 'the downloaded bytes differ from the uploaded ones');
    const info = await sbx.files.getInfo('/home/user/blob.bin');
    assert.equal(info.size, blob.length);
    assert.equal(info.mode & 0o777, 0o600);
    assert.equal(
      (await sbx.runCode('import hashlib\nhashlib.sha256(open("/home/user/blob.bin","rb").read()).hexdigest()')).text,
      `'${createHash('sha256').update(blob).digest('hex')}'`,
      'the sandbox sees the same bytes',
    );

    assert.equal(await sbx.files.makeDir('/home/user/d/e'), true);
    assert.equal(await sbx.files.makeDir('/home/user/d/e'), false);
    const moved = await sbx.files.rename('/home/user/blob.bin', '/home/user/d/e/blob.bin');
    assert.equal(moved.size, blob.length);
    const names = (await sbx.files.list('/home/user/d/e')).map((e) => e.name);
    assert.deepEqual(names, ['blob.bin']);
    assert.equal(await sbx.files.exists('/home/user/blob.bin'), false);
    await sbx.files.remove('/home/user/d');
    assert.equal(await sbx.files.exists('/home/user/d'), false);
    await assert.rejects(sbx.files.read('/home/user/d/e/blob.bin'), NotFoundError);
  });

  it('packs a directory with downloadArchive and unpacks it elsewhere with uploadArchive', async () => {
    await sbx.files.makeDir('/home/user/tree/sub');
    await sbx.files.write('/home/user/tree/a.txt', 'alpha\n');
    await sbx.files.write('/home/user/tree/sub/b.bin', Buffer.from([0, 1, 2, 255]));
    const packed = await sbx.downloadArchive('/home/user/tree', { format: 'tar.gz' });
    assert.deepEqual([...packed.subarray(0, 2)], [0x1f, 0x8b], 'gzip magic');
    const record = await sbx.uploadArchive('/home/user/copy', packed);
    assert.equal(record.status, 'ok');
    assert.equal(record.plugin, 'upload');
    assert.equal(record.files, 2);
    assert.equal(record.archiveBytes, packed.length);
    assert.equal(record.sha256, createHash('sha256').update(packed).digest('hex'));
    assert.equal(await sbx.files.read('/home/user/copy/a.txt'), 'alpha\n');
    assert.deepEqual([...(await sbx.files.read('/home/user/copy/sub/b.bin', { format: 'bytes' }))], [0, 1, 2, 255]);
    await sbx.files.remove('/home/user/tree');
    await sbx.files.remove('/home/user/copy');
  });

  it('extends the keep-alive with setTimeout', async () => {
    const info = await sbx.setTimeout(120);
    assert.equal(info.keepAlive, 120);
    assert.ok(info.idleExpiresAt !== null && info.idleExpiresAt.getTime() > Date.now() + 100_000);
    assert.equal((await sbx.getInfo()).keepAlive, 120);
  });

  it('reads the sandbox\'s resource use from its cgroup with metrics()', async () => {
    const m = await sbx.metrics();
    assert.equal(m.sandboxId, sbx.id);
    assert.ok(m.memoryBytes > 0 && m.memoryLimitBytes !== null, JSON.stringify(m.raw));
    assert.ok(m.executions >= 1 && m.sampledAt !== null, JSON.stringify(m.raw));
  });

  it("works over loopback TCP with a bearer token, as that token's tenant", async () => {
    const remote = await Sandbox.create({ url: tcpUrl, token, metadata: meta });
    try {
      assert.equal((await remote.getInfo()).tenant, 'agents');
      assert.equal((await remote.runCode('6 * 7')).text, '42');
      assert.equal((await remote.commands.run('echo tcp')).stdout, 'tcp\n');
      await remote.files.write('/home/user/t.txt', 'over tcp');
      assert.equal(await remote.files.read('/home/user/t.txt'), 'over tcp');
      assert.deepEqual((await Sandbox.list({ url: tcpUrl, token })).map((s) => s.id), [remote.id]);
      assert.ok(!(await Sandbox.list({ url: supervisor.url })).some((s) => s.id === remote.id), "another tenant's sandbox is visible");
      await assert.rejects(Sandbox.list({ url: tcpUrl }), AuthenticationError);
      await assert.rejects(Sandbox.list({ url: tcpUrl, token: 'not-the-token' }), AuthenticationError);
    } finally {
      assert.equal(await remote.kill(), true);
    }
  });

  it('kills a sandbox, after which it cannot be reached', async () => {
    const other = await Sandbox.create({ url: supervisor.url, metadata: meta });
    {
      await using scoped = await Sandbox.create({ url: supervisor.url });
      assert.equal((await scoped.runCode('1 + 1')).text, '2');
    }
    assert.equal(await other.kill(), true);
    assert.equal(await other.kill(), false);
    await assert.rejects(Sandbox.connect(other.id, { url: supervisor.url }), NotFoundError);
    assert.deepEqual((await Sandbox.list({ url: supervisor.url })).map((s) => s.id), [sbx.id], 'await using left a sandbox behind');
  });
});
