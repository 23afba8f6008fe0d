// The E2B entry point against a fake supervisor: what each E2B call sends (units, names,
// mappings) and how answers come back in E2B's shapes; what cannot map is refused by name.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';

import {
  CommandExitError,
  FilesystemEventType,
  InvalidArgumentError,
  Sandbox,
  UnsupportedOptionError,
  type FilesystemEvent,
  type OutputMessage,
} from '../../src/e2b/index.js';
import { FakeSupervisor, sandboxDoc, sendCreated, sendJson, sendNdjson } from '../support/fake-supervisor.js';

const SB = '/v1/sandboxes/3f2a9c0d1e4b5a67';

describe('E2B entry point', () => {
  let fake: FakeSupervisor;
  let sbx: Sandbox;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('POST', '/v1/sandboxes', (req, res) => sendCreated(req, res));
    fake.on('GET', SB, (_req, res) => sendJson(res, 200, sandboxDoc()));
    sbx = await Sandbox.create({ url: fake.url });
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });
  after(() => fake.close());

  it("creates with E2B's units: timeoutMs as lifetime and idle time, template as the profile", async () => {
    const other = await Sandbox.create('gpu', { url: fake.url, timeoutMs: 90_500, metadata: { u: '1' }, envs: { K: 'V' } });
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, {
      profile: 'gpu',
      metadata: { u: '1' },
      env: { K: 'V' },
      keep_alive_s: 91,
      lifetime_s: 91,
    });
    assert.equal(other.sandboxId, '3f2a9c0d1e4b5a67');
    await Sandbox.create('code-interpreter-v1', { url: fake.url });
    // E2B's default template is the default profile; E2B's default timeout is five minutes.
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, { keep_alive_s: 300, lifetime_s: 300 });
  });

  it('refuses cloud-only options and unknown ones with a message saying why', async () => {
    await assert.rejects(Sandbox.create({ url: fake.url, domain: 'e2b.app' }), (e: unknown) => {
      assert.ok(e instanceof UnsupportedOptionError && e instanceof InvalidArgumentError, String(e));
      assert.match(e.message, /option 'domain' is not supported: .*AIRLOCK_URL/);
      return true;
    });
    await assert.rejects(Sandbox.create({ url: fake.url, allowInternetAccess: false }), /network mode is none/);
    await assert.rejects(Sandbox.create({ url: fake.url, autoPause: true }), /does not pause sandboxes/);
    await assert.rejects(Sandbox.create({ url: fake.url, templateId: 'x' }), /unknown option 'templateId'/);
    await Sandbox.create({ url: fake.url, allowInternetAccess: true, secure: true, logger: console });
    assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 1);
  });

  it('says a timeoutMs past the profile maximum in terms of timeoutMs', async () => {
    fake.on('POST', '/v1/sandboxes', (_req, res) =>
      sendJson(res, 400, { error: { code: 'bad_request', message: 'keep_alive_s 7200 is above the profile maximum 3600' } }),
    );
    await assert.rejects(Sandbox.create({ url: fake.url, timeoutMs: 7_200_000 }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError, String(e));
      assert.match(e.message, /^Sandbox.create: timeoutMs 7200000 is more than the airlock profile allows .*: keep_alive_s 7200 is above/);
      return true;
    });
    fake.on('POST', '/v1/sandboxes', (req, res) => sendCreated(req, res));
  });

  it('runs code with envs, timeoutMs in seconds, language aliases, E2B OutputMessages and executionCount', async () => {
    fake.on('POST', `${SB}/code`, (_req, res) =>
      sendNdjson(res, [
        { type: 'stdout', data: 'hi\n' },
        { type: 'stderr', data: 'warn\n' },
        {
          type: 'display',
          data: {
            'text/plain': '<Figure>',
            'image/png': 'iVBORw0KGgo=',
            'application/vnd.airlock.chart+json': {
              type: 'bar',
              title: 'Sales',
              x_label: 'month',
              y_label: 'units',
              elements: [{ label: 'Jan', group: 'A', value: 3 }],
            },
          },
        },
        { type: 'result', data: { 'text/plain': '2', 'text/html': '<b>2</b>' } },
        { type: 'end', status: 'ok', context_id: 'node', execution_count: 7 },
      ]),
    );
    const out: OutputMessage[] = [];
    const before = Date.now() * 1e6;
    const execution = await sbx.runCode('x', {
      language: 'js',
      envs: { A: 'b' },
      timeoutMs: 2500,
      onStdout: (m) => void out.push(m),
      onStderr: (m) => void out.push(m),
    });
    assert.deepEqual(fake.last('POST', `${SB}/code`).json, { code: 'x', stream: true, language: 'node', timeout_s: 3, env: { A: 'b' } });
    assert.deepEqual(out.map((m) => [m.line, m.error]), [['hi\n', false], ['warn\n', true]]);
    assert.ok(out[0]!.timestamp >= before - 1e9, 'timestamp is Unix epoch nanoseconds');
    assert.equal(execution.text, '2');
    assert.equal(execution.executionCount, 7);
    assert.deepEqual(execution.logs, { stdout: ['hi\n'], stderr: ['warn\n'] });
    const [figure, main] = execution.results;
    assert.equal(figure!.isMainResult, false);
    assert.equal(figure!.png, 'iVBORw0KGgo=');
    assert.equal(figure!.chart?.type, 'bar');
    assert.deepEqual(figure!.chart?.elements, [{ label: 'Jan', group: 'A', value: 3 }]);
    assert.deepEqual(figure!.formats(), ['png', 'chart']);
    assert.deepEqual(main!.formats(), ['html']);
    assert.equal(JSON.parse(JSON.stringify(execution)).executionCount, 7);
    await assert.rejects(sbx.runCode('x', { language: 'python', context: { id: 'c', language: 'python', cwd: '/' } }), /not both/);
  });

  it('creates contexts with a cwd, and lists them in E2B shape', async () => {
    fake.on('POST', `${SB}/contexts`, (req, res) =>
      sendJson(res, 201, { context_id: 'ctx-1', language: req.json.language, cwd: req.json.cwd, state: 'idle', runs: 0 }),
    );
    const ctx = await sbx.createCodeContext({ cwd: '/tmp', language: 'sh' });
    assert.deepEqual(fake.last('POST', `${SB}/contexts`).json, { language: 'bash', cwd: '/tmp' });
    assert.deepEqual(ctx, { id: 'ctx-1', language: 'bash', cwd: '/tmp' });
    await assert.rejects(sbx.createCodeContext({ cwd: 'relative' }), /cwd must be an absolute path/);
  });

  it('throws CommandExitError on a non-zero exit, refuses user root, finds commands by pid', async () => {
    fake.on('POST', `${SB}/commands`, (req, res) => {
      if (req.json.background) return sendJson(res, 201, { command_id: 'c9', pid: 42 });
      sendNdjson(res, [
        { type: 'start', command_id: 'c1', pid: 7 },
        { type: 'stderr', data: 'nope\n' },
        { type: 'exit', exit_code: 3, signal: 0, timed_out: false },
      ]);
    });
    await assert.rejects(sbx.commands.run('false', { cwd: '/tmp', user: 'user', timeoutMs: 1 }), (e: unknown) => {
      assert.ok(e instanceof CommandExitError, String(e));
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr, 'nope\n');
      return true;
    });
    assert.deepEqual(fake.last('POST', `${SB}/commands`).json, { cmd: 'false', cwd: '/tmp', timeout_s: 1 });
    await assert.rejects(sbx.commands.run('id', { user: 'root' }), (e: unknown) => {
      assert.ok(e instanceof UnsupportedOptionError, String(e));
      assert.match(e.message, /user 'root' is refused/);
      return true;
    });
    fake.on('GET', `${SB}/commands`, (_req, res) =>
      sendJson(res, 200, { commands: [{ command_id: 'c9', argv: ['sleep', '9'], pid: 42, state: 'running', background: true }] }),
    );
    fake.on('DELETE', `${SB}/commands/c9`, (_req, res) => sendJson(res, 204));
    const handle = await sbx.commands.run('sleep 9', { background: true });
    assert.equal(handle.pid, 42);
    assert.deepEqual(await sbx.commands.list(), [{ pid: 42, tag: 'c9', cmd: 'sleep', args: ['9'], envs: {}, cwd: '' }]);
    assert.equal(await sbx.commands.kill(42), true);
    assert.equal(await sbx.commands.kill(43), false);
  });

  it('writes many files, making missing parents, and reads bytes, blobs and streams', async () => {
    const files = new Map<string, Buffer>();
    fake.on('PUT', `${SB}/files`, (req, res) => {
      const path = req.query.get('path')!;
      if (path.startsWith('/home/user/new/') && !files.has('/home/user/new')) {
        return sendJson(res, 404, { error: { code: 'not_found', message: 'no such directory' } });
      }
      files.set(path, req.body);
      sendJson(res, 201, { path, size: req.body.length });
    });
    fake.on('GET', `${SB}/files/stat`, (req, res) =>
      files.has(req.query.get('path')!)
        ? sendJson(res, 200, { path: req.query.get('path'), type: 'dir' })
        : sendJson(res, 404, { error: { code: 'not_found', message: 'no such file' } }),
    );
    fake.on('POST', `${SB}/files/mkdir`, (req, res) => {
      files.set(req.json.path, Buffer.alloc(0));
      sendJson(res, 201, { path: req.json.path });
    });
    fake.on('GET', `${SB}/files`, (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' }).end(files.get(req.query.get('path')!));
    });
    const written = await sbx.files.write([
      { path: '/home/user/a.txt', data: 'A' },
      { path: 'new/b.bin', data: new Uint8Array([1, 2]).buffer },
    ]);
    assert.deepEqual(written, [
      { name: 'a.txt', type: 'file', path: '/home/user/a.txt' },
      { name: 'b.bin', type: 'file', path: '/home/user/new/b.bin' },
    ]);
    assert.deepEqual(fake.last('POST', `${SB}/files/mkdir`).json, { path: '/home/user/new', parents: true });
    assert.deepEqual([...(await sbx.files.read('new/b.bin', { format: 'bytes' }))], [1, 2]);
    assert.equal(await (await sbx.files.read('/home/user/a.txt', { format: 'blob' })).text(), 'A');
    const chunks: Uint8Array[] = [];
    for await (const chunk of await sbx.files.read('/home/user/a.txt', { format: 'stream' })) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString(), 'A');
    await assert.rejects(sbx.files.read('/x', { user: 'root' }), /user 'root' is refused/);
  });

  it('watchDir reports creates, writes, chmods and removes between polls, until stop()', async () => {
    let listing: { name: string; type: string; size: number; mode: number; mtime_ms: number }[] = [
      { name: 'keep', type: 'file', size: 1, mode: 0o644, mtime_ms: 1 },
      { name: 'gone', type: 'file', size: 1, mode: 0o644, mtime_ms: 1 },
      { name: 'mode', type: 'file', size: 1, mode: 0o644, mtime_ms: 1 },
    ];
    fake.on('GET', `${SB}/files/stat`, (_req, res) => sendJson(res, 200, { path: '/home/user/w', name: 'w', type: 'dir' }));
    fake.on('GET', `${SB}/files/list`, (_req, res) => sendJson(res, 200, { path: '/home/user/w', entries: listing }));
    const events: FilesystemEvent[] = [];
    let exited = 0;
    const handle = await sbx.files.watchDir('/home/user/w', (e) => void events.push(e), {
      pollIntervalMs: 20,
      onExit: () => void exited++,
    });
    listing = [
      { name: 'keep', type: 'file', size: 5, mode: 0o644, mtime_ms: 2 },
      { name: 'mode', type: 'file', size: 1, mode: 0o600, mtime_ms: 1 },
      { name: 'new', type: 'file', size: 1, mode: 0o644, mtime_ms: 2 },
    ];
    while (events.length < 5) await new Promise((r) => setTimeout(r, 10));
    await handle.stop();
    assert.deepEqual(
      events.map((e) => `${e.type}:${e.name}`).sort(),
      [`${FilesystemEventType.CHMOD}:mode`, 'create:new', 'remove:gone', 'write:keep', 'write:new'],
    );
    assert.equal(exited, 1);
  });

  it('getHost answers host and path without a scheme, and refuses to be used un-awaited', async () => {
    fake.on('POST', `${SB}/ports/8000/link`, (_req, res) => sendJson(res, 200, { path: '/v1/ports/tok123/', port: 8000 }));
    const host = sbx.getHost(8000);
    assert.throws(() => `https://${host as unknown as string}`, /getHost\(port\) is asynchronous/);
    const unixPath = fake.url.slice('unix://'.length);
    assert.equal(await host, `${unixPath}/v1/ports/tok123/`);
    assert.equal(await sbx.airlock.portUrl(8000), `${fake.url}/v1/ports/tok123/`);
    await assert.rejects(sbx.airlock.portUrl(70000), /port must be a whole number from 1 to 65535/);
  });

  it('lists sandboxes through a one-page paginator, filtered by metadata', async () => {
    fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 200, { sandboxes: [sandboxDoc(), sandboxDoc({ id: 'b' })] }));
    const paginator = Sandbox.list({ url: fake.url, query: { metadata: { user: 'u1' } } });
    assert.equal(paginator.hasNext, true);
    const items = await paginator.nextItems();
    assert.deepEqual(items.map((i) => i.sandboxId), ['3f2a9c0d1e4b5a67', 'b']);
    assert.equal(fake.last('GET', '/v1/sandboxes').query.get('metadata.user'), 'u1');
    assert.equal(paginator.hasNext, false);
    await assert.rejects(paginator.nextItems(), /no more items/);
    assert.deepEqual(await Sandbox.list({ url: fake.url, query: { state: ['paused'] } }).nextItems(), []);
  });

  it("setTimeout moves the end to timeoutMs from now; getInfo answers E2B's shape", async () => {
    fake.on('POST', `${SB}/keepalive`, (_req, res) => sendJson(res, 200, sandboxDoc()));
    fake.on('GET', SB, (_req, res) => sendJson(res, 200, sandboxDoc({ created_at: Date.now() - 10_000 })));
    await sbx.setTimeout(60_000);
    const body = fake.last('POST', `${SB}/keepalive`).json;
    assert.equal(body.keep_alive_s, 60);
    assert.ok(body.lifetime_s >= 70 && body.lifetime_s <= 72, JSON.stringify(body));
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, '3f2a9c0d1e4b5a67');
    assert.equal(info.templateId, 'default');
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { user: 'u1' });
  });

  it('getMetrics answers one sample in E2B terms', async () => {
    fake.on('GET', `${SB}/metrics`, (_req, res) =>
      sendJson(res, 200, {
        sandbox_id: '3f2a9c0d1e4b5a67',
        cpu_seconds: 2,
        memory_bytes: 1000,
        memory_limit_bytes: 4000,
        disk_bytes: 10,
        disk_limit_bytes: null,
        uptime_s: 8,
        sampled_at: '2026-11-28T07:12:03Z',
      }),
    );
    const [m, ...rest] = await sbx.getMetrics();
    assert.equal(rest.length, 0);
    assert.deepEqual(
      { memUsed: m!.memUsed, memTotal: m!.memTotal, diskUsed: m!.diskUsed, diskTotal: m!.diskTotal, cpuUsedPct: m!.cpuUsedPct },
      { memUsed: 1000, memTotal: 4000, diskUsed: 10, diskTotal: 0, cpuUsedPct: 25 },
    );
    assert.deepEqual(m!.timestamp, new Date('2026-11-28T07:12:03Z'));
  });
});
