// sbx.files against a scripted supervisor: raw streamed uploads and downloads, the JSON file
// routes, and quota errors.

import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';

import { InvalidRequestError, QuotaExceededError, Sandbox } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson } from '../support/fake-supervisor.js';

const BASE = '/v1/sandboxes/c0ffee0000000003/files';

describe('files', () => {
  let fake: FakeSupervisor;
  let sbx: Sandbox;
  const stored = new Map<string, Buffer>();
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('GET', '/v1/sandboxes/c0ffee0000000003', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'c0ffee0000000003' })));
    fake.on('PUT', BASE, (req, res) => {
      const path = req.query.get('path')!;
      stored.set(path, req.body);
      sendJson(res, 201, { path, size: req.body.length });
    });
    fake.on('GET', BASE, (req, res) => {
      const data = stored.get(req.query.get('path')!);
      if (!data) return sendJson(res, 404, { error: { code: 'not_found', message: `file '${req.query.get('path')}' not found` } });
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': data.length }).end(data);
    });
    sbx = await Sandbox.connect('c0ffee0000000003', { url: fake.url });
  });
  after(() => fake.close());

  it('writes text and bytes with a Content-Length, relative paths under /home/user', async () => {
    const info = await sbx.files.write('notes/a.txt', 'h\u00e9llo');
    assert.deepEqual(info, { path: '/home/user/notes/a.txt', name: 'a.txt', size: 6 });
    const req = fake.last('PUT', BASE);
    assert.equal(req.headers['content-length'], '6');
    assert.equal(req.headers['content-type'], 'application/octet-stream');
    assert.equal(req.query.get('mode'), null);
    await sbx.files.write('/tmp/run.sh', Buffer.from('#!/bin/sh\n'), { mode: 0o755 });
    assert.equal(fake.last('PUT', BASE).query.get('mode'), '0755');
  });

  it('streams a Readable chunked, and reads it back as bytes, text and a stream', async () => {
    const chunks = Array.from({ length: 40 }, (_, i) => Buffer.alloc(64 * 1024, i));
    const info = await sbx.files.write('/home/user/big.bin', Readable.from(chunks));
    const req = fake.last('PUT', BASE);
    assert.equal(req.headers['transfer-encoding'], 'chunked');
    assert.equal(info.size, 40 * 64 * 1024);
    const bytes = await sbx.files.read('/home/user/big.bin', { format: 'bytes' });
    assert.ok(Buffer.isBuffer(bytes));
    assert.ok(bytes.equals(Buffer.concat(chunks)));
    const stream = await sbx.files.read('/home/user/big.bin', { format: 'stream' });
    let total = 0;
    for await (const chunk of stream) total += (chunk as Buffer).length;
    assert.equal(total, bytes.length);
    assert.equal(await sbx.files.read('notes/a.txt'), 'h\u00e9llo');
  });

  it('writes from an async iterable of strings and bytes', async () => {
    async function* parts() {
      yield 'a,b\n';
      yield Buffer.from('1,2\n');
    }
    await sbx.files.write('/home/user/t.csv', parts());
    assert.equal(stored.get('/home/user/t.csv')?.toString(), 'a,b\n1,2\n');
  });

  it('refuses bad arguments before sending anything', async () => {
    await assert.rejects(sbx.files.write('', 'x'), (e: unknown) => e instanceof InvalidRequestError && /non-empty string/.test(e.message));
    await assert.rejects(sbx.files.write('/a', 42 as never), (e: unknown) => e instanceof InvalidRequestError && /data must be/.test(e.message));
    await assert.rejects(sbx.files.write('/a', 'x', { mode: 0o10000 }), (e: unknown) => e instanceof InvalidRequestError && /mode/.test(e.message));
    await assert.rejects(sbx.files.read('/a', { format: 'json' as never }), (e: unknown) => e instanceof InvalidRequestError && /format/.test(e.message));
  });

  it('maps a 413 during an upload to QuotaExceededError with the server message', async () => {
    fake.on('PUT', `${BASE}`, (_req, res) =>
      sendJson(res, 413, { error: { code: 'payload_too_large', message: "file '/home/user/x' passes the workspace quota (workspace_mb = 64)" } }),
    );
    await assert.rejects(sbx.files.write('x', Buffer.alloc(1024)), (e: unknown) => e instanceof QuotaExceededError && /workspace_mb = 64/.test(e.message));
  });

  it('lists, stats, checks, makes, removes and renames through the JSON routes', async () => {
    fake.on('GET', `${BASE}/list`, (req, res) =>
      sendJson(res, 200, {
        path: req.query.get('path'),
        entries: [
          { name: 'a.csv', type: 'file', size: 10, mode: 420, mtime_ms: 1795000000000 },
          { name: 'sub', type: 'dir', size: 0, mode: '0755', mtime_ms: 1795000000000 },
          { name: 'dev', type: 'socket?', size: 0, mode: 0 },
        ],
      }),
    );
    fake.on('GET', `${BASE}/stat`, (req, res) =>
      req.query.get('path') === '/home/user/missing'
        ? sendJson(res, 404, { error: { code: 'not_found', message: "'/home/user/missing' not found" } })
        : sendJson(res, 200, { path: req.query.get('path'), type: 'dir', size: 0, mode: 493 }),
    );
    fake.on('POST', `${BASE}/mkdir`, (_req, res) => sendJson(res, 201, { path: '/home/user/missing' }));
    fake.on('POST', `${BASE}/remove`, (_req, res) => sendJson(res, 204));
    fake.on('POST', `${BASE}/rename`, (_req, res) => sendJson(res, 204));

    const entries = await sbx.files.list();
    assert.equal(fake.last('GET', `${BASE}/list`).query.get('path'), '/home/user');
    assert.deepEqual(entries.map((e) => [e.name, e.path, e.type, e.mode]), [
      ['a.csv', '/home/user/a.csv', 'file', 0o644],
      ['sub', '/home/user/sub', 'dir', 0o755],
      ['dev', '/home/user/dev', 'other', 0],
    ]);
    assert.equal(entries[0]!.modifiedTime?.getTime(), 1795000000000);
    const info = await sbx.files.getInfo('/home/user/sub');
    assert.equal(info.name, 'sub');
    assert.equal(info.type, 'dir');
    assert.equal(await sbx.files.exists('/home/user/sub'), true);
    assert.equal(await sbx.files.exists('missing'), false);
    assert.equal(await sbx.files.makeDir('missing'), true);
    assert.deepEqual(fake.last('POST', `${BASE}/mkdir`).json, { path: '/home/user/missing', parents: true });
    assert.equal(await sbx.files.makeDir('/home/user/sub'), false, 'an existing directory answers false');
    await sbx.files.remove('/home/user/sub');
    assert.deepEqual(fake.last('POST', `${BASE}/remove`).json, { path: '/home/user/sub', recursive: true });
    await sbx.files.remove('/home/user/sub', { recursive: false });
    assert.deepEqual(fake.last('POST', `${BASE}/remove`).json, { path: '/home/user/sub', recursive: false });
    const moved = await sbx.files.rename('a.csv', '/home/user/sub2');
    assert.deepEqual(fake.last('POST', `${BASE}/rename`).json, { from: '/home/user/a.csv', to: '/home/user/sub2' });
    assert.equal(moved.path, '/home/user/sub2');
  });
});
