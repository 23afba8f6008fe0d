// sbx.commands against a scripted supervisor: streamed foreground runs, background handles that
// attach to the events, stdin, signals, kill, and timeouts.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';

import { CommandHandle, InvalidRequestError, NotFoundError, Sandbox, TimeoutError } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson, sendNdjson, startNdjson } from '../support/fake-supervisor.js';

const BASE = '/v1/sandboxes/c0ffee0000000002/commands';
const exitEvent = { type: 'exit', exit_code: 0, signal: 0, timed_out: false, stdout_bytes: 3, stderr_bytes: 1, stdout_truncated: false, stderr_truncated: false, duration_ms: 3.1 };

describe('commands', () => {
  let fake: FakeSupervisor;
  let sbx: Sandbox;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('GET', '/v1/sandboxes/box', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'c0ffee0000000002', name: 'box' })));
    sbx = await Sandbox.connect('box', { url: fake.url });
  });
  after(() => fake.close());

  it('asks for frames and reads output from them as its own bytes', async () => {
    let accept = '';
    fake.on('POST', BASE, (req, res) => {
      accept = String(req.headers['accept'] ?? '');
      res.writeHead(200, { 'Content-Type': 'application/vnd.airlock.frames' });
      const frame = (kind: string, payload: Buffer) => {
        const head = Buffer.alloc(5);
        head.write(kind, 0, 'latin1');
        head.writeUInt32BE(payload.length, 1);
        return Buffer.concat([head, payload]);
      };
      const euro = Buffer.from('€');
      const all = Buffer.concat([
        frame('j', Buffer.from(JSON.stringify({ type: 'start', command_id: 'c9', pid: 3 }))),
        frame('o', Buffer.concat([Buffer.from('price '), euro.subarray(0, 1)])),
        frame('o', Buffer.concat([euro.subarray(1), Buffer.from('5\n')])),
        frame('e', Buffer.from([0xff])),
        frame('j', Buffer.from(JSON.stringify(exitEvent))),
      ]);
      // Split mid-frame: the reader must join pieces.
      res.write(all.subarray(0, 7));
      res.end(all.subarray(7));
    });
    const result = await sbx.commands.run('x');
    assert.match(accept, /application\/vnd\.airlock\.frames/);
    assert.equal(result.stdout, 'price €5\n');
    assert.equal(result.stderr, '\ufffd');
    assert.equal(result.commandId, 'c9');
  });

  it('runs a shell string in the foreground, streaming chunks to the callbacks as they come', async () => {
    let stdoutBeforeExit = false;
    let gotChunk!: () => void;
    const chunkSeen = new Promise<void>((resolve) => (gotChunk = resolve));
    fake.on('POST', BASE, async (req, res) => {
      assert.deepEqual(req.json, { cmd: 'echo hi; echo oops >&2', env: { K: 'V' }, cwd: '/tmp', stdin: 'in', timeout_s: 5 });
      const stream = startNdjson(res);
      stream.write({ type: 'start', command_id: 'c1', pid: 7 });
      stream.write({ type: 'stdout', data: 'hi\n' });
      stdoutBeforeExit = await Promise.race([chunkSeen.then(() => true), sleep(5000, undefined, { ref: false }).then(() => false)]);
      stream.write({ type: 'stderr', data_base64: Buffer.from([0xff]).toString('base64') });
      stream.write({ ...exitEvent, exit_code: 3, review: { verdict: 'allow', reviewer: null, rule: null, reason: null }, audit: { execution: 'e2', skipped: 'another execution ...' }, new_field: true });
      stream.end();
    });
    const out: string[] = [];
    const err: string[] = [];
    const result = await sbx.commands.run('echo hi; echo oops >&2', {
      envs: { K: 'V' },
      cwd: '/tmp',
      stdin: 'in',
      timeout: 5,
      onStdout: (d) => {
        out.push(d);
        gotChunk();
      },
      onStderr: (d) => void err.push(d),
    });
    assert.equal(stdoutBeforeExit, true, 'onStdout was not called before the command exited');
    assert.deepEqual(out, ['hi\n']);
    assert.deepEqual(err, ['\ufffd']);
    assert.equal(result.exitCode, 3, 'a non-zero exit resolves, it does not reject');
    assert.equal(result.stdout, 'hi\n');
    assert.equal(result.commandId, 'c1');
    assert.equal(result.pid, 7);
    assert.equal(result.signal, null);
    assert.equal(result.timedOut, false);
    assert.equal(result.durationMs, 3.1);
    assert.equal(result.review?.verdict, 'allow');
    assert.equal(result.audit?.execution, 'e2');
    assert.equal(result.audit?.skipped, 'another execution ...');
    assert.deepEqual(result.audit?.connections, []);
    assert.equal(result.rawExit['new_field'], true);
  });

  it('sends an argv array as argv and bytes for stdin as base64', async () => {
    fake.on('POST', BASE, (_req, res) => sendNdjson(res, [{ type: 'start', command_id: 'c2', pid: 8 }, exitEvent]));
    await sbx.commands.run(['ls', '-la'], { stdin: Buffer.from([0, 1, 2]) });
    assert.deepEqual(fake.last('POST', BASE).json, { argv: ['ls', '-la'], stdin_base64: 'AAEC' });
  });

  it('refuses an empty argv before sending anything', async () => {
    const before = fake.requests.length;
    await assert.rejects(sbx.commands.run([]), (e: unknown) => e instanceof InvalidRequestError && /non-empty array/.test(e.message));
    assert.equal(fake.requests.length, before);
  });

  it('rejects with TimeoutError carrying the output when the timeout killed the command', async () => {
    fake.on('POST', BASE, (_req, res) =>
      sendNdjson(res, [{ type: 'stdout', data: 'partial' }, { ...exitEvent, exit_code: null, signal: 9, timed_out: true }]),
    );
    await assert.rejects(sbx.commands.run('sleep 100', { timeout: 1 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutError);
      assert.equal(e.message, "command 'sleep 100': timed out after 1 s and was killed");
      assert.equal(e.result?.stdout, 'partial');
      assert.equal(e.result?.signal, 9);
      assert.equal(e.result?.exitCode, null);
      return true;
    });
  });

  it('starts a background command and waits for it through its events', async () => {
    fake.on('POST', BASE, (req, res) => {
      assert.equal(req.json.background, true);
      sendJson(res, 201, { command_id: 'c3', pid: 9 });
    });
    fake.on('GET', `${BASE}/c3/events`, (_req, res) =>
      sendNdjson(res, [{ type: 'stdout', data: 'buffered\n' }, { type: 'stdout', data: 'live\n' }, { ...exitEvent, exit_code: 0 }]),
    );
    const handle = await sbx.commands.run('python3 -m http.server', { background: true });
    assert.ok(handle instanceof CommandHandle);
    assert.equal(handle.id, 'c3');
    assert.equal(handle.pid, 9);
    const seen: string[] = [];
    const result = await handle.wait({ onStdout: (d) => void seen.push(d) });
    assert.deepEqual(seen, ['buffered\n', 'live\n']);
    assert.equal(result.stdout, 'buffered\nlive\n');
    assert.equal(result.commandId, 'c3');
    assert.equal(await handle.wait(), result, 'a second wait answers the same result');
  });

  it('attaches at once when a background command has callbacks, so they run live', async () => {
    let attached!: () => void;
    const attachedNow = new Promise<void>((resolve) => (attached = resolve));
    fake.on('POST', BASE, (_req, res) => sendJson(res, 201, { command_id: 'c4', pid: 10 }));
    fake.on('GET', `${BASE}/c4/events`, (_req, res) => {
      attached();
      sendNdjson(res, [{ type: 'stderr', data: 'e' }, exitEvent]);
    });
    const err: string[] = [];
    const handle = await sbx.commands.run('x', { background: true, onStderr: (d) => void err.push(d) });
    await Promise.race([attachedNow, sleep(5000, undefined, { ref: false }).then(() => assert.fail('the handle did not attach to the events'))]);
    const result = await handle.wait();
    assert.deepEqual(err, ['e']);
    assert.equal(result.stderr, 'e');
  });

  it('sends stdin, signals and kills through the handle', async () => {
    fake.on('POST', BASE, (_req, res) => sendJson(res, 201, { command_id: 'c5', pid: 11 }));
    fake.on('POST', `${BASE}/c5/stdin`, (_req, res) => sendJson(res, 204));
    fake.on('POST', `${BASE}/c5/signal`, (_req, res) => sendJson(res, 204));
    fake.on('DELETE', `${BASE}/c5`, (_req, res) => sendJson(res, 204));
    const handle = await sbx.commands.run('cat', { background: true });
    await handle.sendStdin('line\n');
    assert.deepEqual(fake.last('POST', `${BASE}/c5/stdin`).json, { eof: false, data: 'line\n' });
    await handle.sendStdin(Buffer.from([0xfe]), { eof: true });
    assert.deepEqual(fake.last('POST', `${BASE}/c5/stdin`).json, { eof: true, data_base64: '/g==' });
    await handle.closeStdin();
    assert.deepEqual(fake.last('POST', `${BASE}/c5/stdin`).json, { eof: true, data: '' });
    await handle.signal('SIGTERM');
    assert.deepEqual(fake.last('POST', `${BASE}/c5/signal`).json, { signal: 'SIGTERM' });
    assert.equal(await handle.kill(), true);
    fake.on('DELETE', `${BASE}/c5`, (_req, res) => sendJson(res, 404, { error: { code: 'not_found', message: "command 'c5' not found" } }));
    assert.equal(await handle.kill(), false, 'killing a command that is gone answers false');
  });

  it('yields output chunks with for await, then wait() answers from the same stream', async () => {
    fake.on('POST', BASE, (_req, res) => sendJson(res, 201, { command_id: 'c6', pid: 12 }));
    fake.on('GET', `${BASE}/c6/events`, (_req, res) =>
      sendNdjson(res, [{ type: 'stdout', data: 'a' }, { type: 'stderr', data: 'b' }, { ...exitEvent, exit_code: 4 }]),
    );
    const handle = await sbx.commands.run('x', { background: true });
    const chunks = [];
    for await (const chunk of handle) chunks.push(chunk);
    assert.deepEqual(chunks, [{ stream: 'stdout', data: 'a' }, { stream: 'stderr', data: 'b' }]);
    const attaches = fake.requests.filter((r) => r.path === `${BASE}/c6/events`).length;
    assert.equal((await handle.wait()).exitCode, 4);
    assert.equal(fake.requests.filter((r) => r.path === `${BASE}/c6/events`).length, attaches, 'wait() attached again');
  });

  it('lists commands and connects to one by id', async () => {
    fake.on('GET', BASE, (_req, res) =>
      sendJson(res, 200, {
        commands: [{ command_id: 'c7', argv: ['sleep', '9'], pid: 13, state: 'running', background: true, started_at: 1795000000000, exit_code: null, signal: null, extra: 1 }],
      }),
    );
    const list = await sbx.commands.list();
    assert.equal(list.length, 1);
    assert.deepEqual(list[0]!.argv, ['sleep', '9']);
    assert.equal(list[0]!.state, 'running');
    assert.equal(list[0]!.exitCode, null);
    const handle = await sbx.commands.connect('c7');
    assert.equal(handle.pid, 13);
    await assert.rejects(sbx.commands.connect('nope'), (e: unknown) => e instanceof NotFoundError && /'nope' not found/.test(e.message));
  });
});
