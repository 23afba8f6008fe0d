// runCode against a scripted supervisor: NDJSON events reach the callbacks as they arrive,
// output and results are assembled into an Execution, base64 output and images decode, and the
// run's end status maps to the right outcome.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';

import {
  Execution,
  InvalidRequestError,
  NotFoundError,
  type OutputMessage,
  Result,
  Sandbox,
  SupervisorUnavailableError,
  TimeoutError,
} from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson, sendNdjson, startNdjson } from '../support/fake-supervisor.js';

// A 1x1 PNG.
const PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('runCode', () => {
  let fake: FakeSupervisor;
  let sbx: Sandbox;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('POST', '/v1/sandboxes', (_req, res) => sendJson(res, 201, sandboxDoc({ id: 'c0ffee0000000001' })));
    sbx = await Sandbox.create({ url: fake.url });
  });
  after(() => fake.close());

  it('calls onStdout while the run is still going, before its end event', async () => {
    let calledBeforeEnd = false;
    let markCalled!: () => void;
    const called = new Promise<void>((resolve) => (markCalled = resolve));
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', async (_req, res) => {
      const stream = startNdjson(res);
      stream.write({ type: 'stdout', data: 'tick\n' });
      calledBeforeEnd = await Promise.race([called.then(() => true), sleep(5000, undefined, { ref: false }).then(() => false)]);
      stream.write({ type: 'end', status: 'ok', duration_ms: 1, context_id: 'python', context_restarted: false });
      stream.end();
    });
    const seen: OutputMessage[] = [];
    const execution = await sbx.runCode('print("tick")', {
      onStdout: (m) => {
        seen.push(m);
        markCalled();
      },
    });
    assert.equal(calledBeforeEnd, true, 'onStdout was not called until the stream ended');
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.line, 'tick\n');
    assert.equal(seen[0]!.error, false);
    assert.ok(seen[0]!.timestamp instanceof Date);
    assert.deepEqual(execution.logs.stdout, ['tick\n']);
  });

  it('assembles output, results, displays and the error, calling every callback in order', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (req, res) => {
      assert.deepEqual(req.json, { code: 'run()', stream: true, language: 'python', context_id: 'ctx-2', timeout_s: 12.5 });
      sendNdjson(res, [
        { type: 'stdout', data: 'hello\n' },
        { type: 'stderr', data_base64: Buffer.from([0x77, 0x61, 0x72, 0x6e, 0xff, 0x0a]).toString('base64') },
        { type: 'display', data: { 'image/png': PNG_BASE64, 'text/plain': '<Figure size 640x480 with 1 Axes>' } },
        { type: 'result', data: { 'text/plain': '3', 'text/html': '<b>3</b>', 'application/json': { n: 3 }, 'application/x-new': 'z' } },
        { type: 'error', name: 'ZeroDivisionError', value: 'division by zero', traceback: ['Traceback:', '  line 1', 'ZeroDivisionError'] },
        { type: 'future_event', data: 'ignored' },
        { type: 'end', status: 'error', duration_ms: 12.5, context_id: 'ctx-2', context_restarted: false, review: { verdict: 'allow', reviewer: null },
          audit: {
            execution: '9b1e0c2d4f6a8e01', processes_started: 1,
            processes: [{ ns_pid: 5, path: '/usr/bin/python3', argv: ['python3', '-c', 'x'] }],
            connections_allowed: 0, connections_denied: 1,
            connections: [{ verdict: 'deny', protocol: 'tcp', address: '10.255.255.1', port: 80, rule: 'protected:10.0.0.0/8', rule_text: 'protected range 10.0.0.0/8 (private)', count: 1 }],
            bytes_sent: 0, bytes_received: 0, events_dropped: 0, fail_closed: false, failed: false,
            first_denial: 'connection to 10.255.255.1:80/tcp refused by protected range 10.0.0.0/8 (private)',
          } },
      ]);
    });
    const order: string[] = [];
    const execution = await sbx.runCode('run()', {
      language: 'python',
      context: { id: 'ctx-2', language: 'python', state: 'idle', createdAt: null, runs: 0, raw: {} },
      timeout: 12.5,
      onStdout: (m) => void order.push(`stdout:${m.line}`),
      onStderr: (m) => void order.push(`stderr:${m.error}`),
      onResult: (r) => void order.push(`result:${r.isMainResult}`),
      onError: (e) => void order.push(`error:${e.name}`),
    });
    assert.deepEqual(order, ['stdout:hello\n', 'stderr:true', 'result:false', 'result:true', 'error:ZeroDivisionError']);
    assert.ok(execution instanceof Execution);
    assert.equal(execution.stdout, 'hello\n');
    assert.equal(execution.logs.stderr[0], 'warn\ufffd\n', 'base64 stderr decodes, invalid UTF-8 replaced');
    assert.equal(execution.results.length, 2);
    const [figure, main] = execution.results as [Result, Result];
    assert.equal(figure.png, PNG_BASE64);
    assert.deepEqual([...figure.pngBuffer!.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.deepEqual(figure.formats(), ['png']);
    assert.equal(execution.text, '3');
    assert.equal(main.html, '<b>3</b>');
    assert.deepEqual(main.json, { n: 3 });
    assert.deepEqual(main.formats(), ['html', 'json', 'application/x-new']);
    assert.equal(main.extra['application/x-new'], 'z');
    assert.equal(String(main), '3');
    assert.equal(execution.error?.name, 'ZeroDivisionError');
    assert.equal(execution.error?.value, 'division by zero');
    assert.equal(execution.error?.traceback, 'Traceback:\n  line 1\nZeroDivisionError');
    assert.equal(execution.status, 'error');
    assert.equal(execution.durationMs, 12.5);
    assert.equal(execution.contextId, 'ctx-2');
    assert.equal(execution.review?.verdict, 'allow');
    assert.equal(execution.review?.reviewer, null);
    assert.equal(execution.audit?.execution, '9b1e0c2d4f6a8e01');
    assert.deepEqual(execution.audit?.processes, [{ nsPid: 5, path: '/usr/bin/python3', argv: ['python3', '-c', 'x'] }]);
    assert.equal(execution.audit?.connectionsDenied, 1);
    assert.equal(execution.audit?.connections[0]?.rule, 'protected:10.0.0.0/8');
    assert.equal(execution.audit?.connections[0]?.port, 80);
    assert.match(execution.audit?.firstDenial ?? '', /^connection to 10\.255\.255\.1:80\/tcp refused/);
    assert.equal(execution.audit?.failed, false);
    assert.equal(execution.audit?.skipped, null);
    assert.deepEqual(JSON.parse(JSON.stringify(execution)).results[0], { 'image/png': PNG_BASE64, 'text/plain': '<Figure size 640x480 with 1 Axes>' });
  });

  it('waits for a callback that returns a promise before handling the next event', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (_req, res) =>
      sendNdjson(res, [
        { type: 'stdout', data: 'a' },
        { type: 'stdout', data: 'b' },
        { type: 'end', status: 'ok' },
      ]),
    );
    const log: string[] = [];
    await sbx.runCode('x', {
      onStdout: async (m) => {
        log.push(`start ${m.line}`);
        await sleep(20);
        log.push(`done ${m.line}`);
      },
    });
    assert.deepEqual(log, ['start a', 'done a', 'start b', 'done b']);
  });

  it('reads events split across chunks, with several events in one chunk', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', async (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
      const text = '{"type":"stdout","data":"h\u00e9llo"}\n{"type":"stdout","data":" w"}\n{"type":"result","data":{"text/plain":"42"}}\n{"type":"end","status":"ok"}\n';
      const bytes = Buffer.from(text);
      // Cut inside the two-byte "é" and inside a line.
      for (const [from, to] of [[0, 27], [27, 40], [40, bytes.length]] as const) {
        res.write(bytes.subarray(from, to));
        await sleep(5);
      }
      res.end();
    });
    const execution = await sbx.runCode('x');
    assert.equal(execution.stdout, 'h\u00e9llo w');
    assert.equal(execution.text, '42');
  });

  it('rejects with TimeoutError carrying the partial execution when the run timed out', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (_req, res) =>
      sendNdjson(res, [
        { type: 'stdout', data: 'started\n' },
        { type: 'error', name: 'KeyboardInterrupt', value: '', traceback: [] },
        { type: 'end', status: 'timeout', duration_ms: 1000, context_id: 'python', context_restarted: false },
      ]),
    );
    await assert.rejects(sbx.runCode('while True: pass', { timeout: 1 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutError);
      assert.equal(e.message, 'code run timed out after 1 s and was interrupted');
      assert.equal(e.execution?.stdout, 'started\n');
      assert.equal(e.execution?.error?.name, 'KeyboardInterrupt');
      return true;
    });
  });

  it('reports a lost context as an execution error', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (_req, res) =>
      sendNdjson(res, [{ type: 'end', status: 'context_lost', context_id: 'python', context_restarted: true }]),
    );
    const execution = await sbx.runCode('import os; os._exit(1)');
    assert.equal(execution.status, 'context_lost');
    assert.equal(execution.contextRestarted, true);
    assert.equal(execution.error?.name, 'ContextLost');
    assert.match(execution.error!.value, /context 'python' died during the run/);
  });

  it('rejects with SupervisorUnavailableError when the stream stops before its end event', async () => {
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (_req, res) => sendNdjson(res, [{ type: 'stdout', data: 'x' }]));
    await assert.rejects(sbx.runCode('x'), (e: unknown) => e instanceof SupervisorUnavailableError && /before the 'end' event/.test(e.message));
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/code', (_req, res) => {
      const stream = startNdjson(res);
      stream.write({ type: 'stdout', data: 'x' });
      setTimeout(() => res.destroy(), 20);
    });
    await assert.rejects(sbx.runCode('x'), SupervisorUnavailableError);
  });

  it('creates, lists, restarts and removes code contexts', async () => {
    const ctx = { context_id: 'ctx-9', language: 'node', state: 'idle', created_at: 1795000000000, runs: 0, future: 1 };
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/contexts', (req, res) => sendJson(res, 201, { ...ctx, language: req.json.language }));
    fake.on('GET', '/v1/sandboxes/c0ffee0000000001/contexts', (_req, res) => sendJson(res, 200, { contexts: [ctx, 'junk'] }));
    fake.on('POST', '/v1/sandboxes/c0ffee0000000001/contexts/ctx-9/restart', (_req, res) => sendJson(res, 200, { ...ctx, runs: 0 }));
    fake.on('DELETE', '/v1/sandboxes/c0ffee0000000001/contexts/ctx-9', (_req, res) => sendJson(res, 204));
    const created = await sbx.createCodeContext({ language: 'node' });
    assert.equal(created.id, 'ctx-9');
    assert.equal(created.language, 'node');
    assert.equal(created.createdAt?.getTime(), 1795000000000);
    assert.deepEqual((await sbx.listCodeContexts()).map((c) => c.id), ['ctx-9']);
    assert.equal((await sbx.restartCodeContext(created)).id, 'ctx-9');
    await sbx.removeCodeContext('ctx-9');
    assert.equal(fake.last('DELETE', '/v1/sandboxes/c0ffee0000000001/contexts/ctx-9').method, 'DELETE');
    await sbx.createCodeContext();
    assert.deepEqual(fake.last('POST', '/v1/sandboxes/c0ffee0000000001/contexts').json, { language: 'python' });
  });

  it('fetches a run taken over after a supervisor restart, with what was held', async () => {
    fake.on('GET', '/v1/sandboxes/c0ffee0000000001/contexts/python-2/runs/last/events', (_req, res) =>
      sendNdjson(res, [
        { type: 'supervisor_restart', run_id: 'r4', held_bytes: 120, dropped_bytes: 0 },
        { type: 'stdout', data: 'slept 42\n' },
        { type: 'result', data: { 'text/plain': '42' } },
        { type: 'end', status: 'ok', duration_ms: 3, context_id: 'python-2', context_restarted: false, execution_count: 4 },
      ]),
    );
    const lines: string[] = [];
    const execution = await sbx.recoveredRun('python-2', 'last', { onStdout: (m) => void lines.push(m.line) });
    assert.deepEqual(execution.restart, { type: 'supervisor_restart', run_id: 'r4', held_bytes: 120, dropped_bytes: 0 });
    assert.deepEqual(lines, ['slept 42\n']);
    assert.equal(execution.text, '42');
    assert.equal(execution.executionCount, 4);
    await assert.rejects(sbx.recoveredRun('python', 'r1'), NotFoundError);
    await assert.rejects(sbx.recoveredRun('python', ''), InvalidRequestError);
  });
});
