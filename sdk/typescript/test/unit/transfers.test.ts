// Transfers against a scripted supervisor: what transferIn/transferOut send, progress events and
// the final record, TransferError for a record that is not ok, list and cancel, and archives
// streamed up and down.

import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';

import {
  AirlockError,
  ForbiddenError,
  InvalidRequestError,
  Sandbox,
  SupervisorUnavailableError,
  TransferError,
  type TransferProgress,
} from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson, sendNdjson } from '../support/fake-supervisor.js';

const SB = '/v1/sandboxes/c0ffee0000000004';
const RECORD = {
  id: 'tr-1',
  direction: 'in',
  plugin: 'http',
  location: 'https://data.example.com/iris.tar.gz?\u2026',
  sandbox_path: '/home/user/data',
  files: 3,
  dirs: 1,
  links: 0,
  bytes: 4096,
  archive_bytes: 812,
  sha256: 'ab'.repeat(32),
  ms: 41.5,
  status: 'ok',
  error: null,
};

describe('transfers', () => {
  let fake: FakeSupervisor;
  let sbx: Sandbox;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('GET', SB, (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'c0ffee0000000004' })));
    sbx = await Sandbox.connect('c0ffee0000000004', { url: fake.url });
  });
  after(() => fake.close());

  it('transferIn sends the spec, reports progress and resolves with the record', async () => {
    fake.on('POST', `${SB}/transfers`, (_req, res) =>
      sendNdjson(res, [
        { type: 'progress', transfer_id: 'tr-1', bytes: 400, rate_bps: 1600 },
        { type: 'progress', transfer_id: 'tr-1', bytes: 812, rate_bps: 1700 },
        { ...RECORD, type: 'transfer', new_field: 1 },
      ]),
    );
    const seen: TransferProgress[] = [];
    const record = await sbx.transferIn('https://data.example.com/iris.tar.gz?sig=x', 'data', {
      onProgress: (p) => void seen.push(p),
    });
    const req = fake.last('POST', `${SB}/transfers`);
    assert.deepEqual(req.json, { direction: 'in', source: 'https://data.example.com/iris.tar.gz?sig=x', path: '/home/user/data' });
    assert.match(String(req.headers['accept']), /application\/x-ndjson/);
    assert.deepEqual(seen, [
      { transferId: 'tr-1', bytes: 400, rateBps: 1600 },
      { transferId: 'tr-1', bytes: 812, rateBps: 1700 },
    ]);
    assert.equal(record.id, 'tr-1');
    assert.equal(record.sandboxPath, '/home/user/data');
    assert.equal(record.archiveBytes, 812);
    assert.equal(record.files, 3);
    assert.equal(record.sha256, 'ab'.repeat(32));
    assert.equal(record.ms, 41.5);
    assert.equal(record.status, 'ok');
    assert.equal(record.error, null);
    assert.equal(record.raw['new_field'], 1);
    assert.equal(record.raw['type'], undefined);
  });

  it('transferOut names the destination', async () => {
    fake.on('POST', `${SB}/transfers`, (_req, res) =>
      sendNdjson(res, [{ ...RECORD, type: 'transfer', direction: 'out', plugin: 'hostdir', location: 'hostdir:results/r.tar.gz' }]),
    );
    const record = await sbx.transferOut('hostdir:results/r.tar.gz', '/home/user/results');
    assert.deepEqual(fake.last('POST', `${SB}/transfers`).json, {
      direction: 'out',
      dest: 'hostdir:results/r.tar.gz',
      path: '/home/user/results',
    });
    assert.equal(record.direction, 'out');
    assert.equal(record.plugin, 'hostdir');
  });

  it('rejects with TransferError carrying the record when it is not ok', async () => {
    for (const [status, error] of [
      ['denied', "URL 'https://evil.example/x.tgz' matches no transfer.http.allow pattern"],
      ['error', "entry '../x': a '..' component (it would leave the target)"],
      ['cancelled', null],
    ] as const) {
      fake.on('POST', `${SB}/transfers`, (_req, res) =>
        sendNdjson(res, [{ ...RECORD, type: 'transfer', status, error, sha256: null }]),
      );
      await assert.rejects(sbx.transferIn('https://evil.example/x.tgz', '/home/user/x'), (e: unknown) => {
        assert.ok(e instanceof TransferError);
        assert.ok(e instanceof AirlockError);
        assert.equal(e.code, status);
        assert.equal(e.transfer.status, status);
        assert.equal(e.transfer.sha256, null);
        assert.ok(e.message.includes(`: ${status}: ${error ?? 'no reason given'}`), e.message);
        assert.ok(e.message.includes('https://evil.example/x.tgz'), e.message);
        return true;
      });
    }
  });

  it('maps refusals, and reports a stream cut before the record', async () => {
    fake.on('POST', `${SB}/transfers`, (_req, res) =>
      sendJson(res, 400, { error: { code: 'bad_request', message: "field 'source' is required for direction \"in\"" } }),
    );
    await assert.rejects(sbx.transferIn('hostdir:d/x', '/home/user/x'), (e: unknown) => e instanceof InvalidRequestError && /field 'source'/.test(e.message));
    fake.on('POST', `${SB}/transfers`, (_req, res) => sendNdjson(res, [{ type: 'progress', transfer_id: 'tr-1', bytes: 1, rate_bps: 1 }]));
    await assert.rejects(
      sbx.transferIn('hostdir:d/x', '/home/user/x'),
      (e: unknown) => e instanceof SupervisorUnavailableError && /before the 'transfer' event/.test(e.message),
    );
    const before = fake.requests.length;
    await assert.rejects(sbx.transferOut('', '/home/user/x'), InvalidRequestError);
    assert.equal(fake.requests.length, before, 'an empty destination is refused before sending');
  });

  it('lists transfers and cancels one, false when it already ended or is unknown', async () => {
    fake.on('GET', `${SB}/transfers`, (_req, res) =>
      sendJson(res, 200, { transfers: [{ ...RECORD, status: 'running' }, { ...RECORD, id: 'tr-2' }, 'junk'] }),
    );
    fake.on('DELETE', `${SB}/transfers/tr-1`, (_req, res) => sendJson(res, 204));
    fake.on('DELETE', `${SB}/transfers/tr-2`, (_req, res) =>
      sendJson(res, 409, { error: { code: 'conflict', message: "transfer 'tr-2' already ended (ok)" } }),
    );
    const listed = await sbx.listTransfers();
    assert.deepEqual(listed.map((t) => [t.id, t.status]), [['tr-1', 'running'], ['tr-2', 'ok']]);
    assert.equal(await sbx.cancelTransfer('tr-1'), true);
    assert.equal(fake.last('DELETE', `${SB}/transfers/tr-1`).method, 'DELETE');
    assert.equal(await sbx.cancelTransfer('tr-2'), false);
    assert.equal(await sbx.cancelTransfer('tr-9'), false, 'unknown: the fake answers 404');
  });

  it('uploads an archive as bytes or a stream, and maps a refused one', async () => {
    const received: Buffer[] = [];
    fake.on('PUT', `${SB}/archive`, (req, res) => {
      received.push(req.body);
      sendJson(res, 201, { ...RECORD, id: undefined, plugin: 'upload', location: 'request body', sandbox_path: req.query.get('path'), archive_bytes: req.body.length });
    });
    const bytes = Buffer.from([0x1f, 0x8b, 1, 2, 3]);
    const record = await sbx.uploadArchive('repo', bytes);
    const req = fake.last('PUT', `${SB}/archive`);
    assert.equal(req.query.get('path'), '/home/user/repo');
    assert.equal(req.headers['content-type'], 'application/octet-stream');
    assert.equal(req.headers['content-length'], '5');
    assert.deepEqual([record.plugin, record.sandboxPath, record.archiveBytes], ['upload', '/home/user/repo', 5]);
    const chunks = Array.from({ length: 20 }, (_, i) => Buffer.alloc(64 * 1024, i));
    await sbx.uploadArchive('/tmp/big', Readable.from(chunks));
    assert.equal(fake.last('PUT', `${SB}/archive`).headers['transfer-encoding'], 'chunked');
    assert.ok(received.at(-1)!.equals(Buffer.concat(chunks)));
    await assert.rejects(sbx.uploadArchive('/tmp/x', 'text' as never), InvalidRequestError);

    fake.on('PUT', `${SB}/archive`, (_req, res) =>
      sendJson(res, 400, { error: { code: 'bad_request', message: "archive into /home/user/x: entry 'lnk': a symlink to '/etc/passwd', outside the target" } }),
    );
    await assert.rejects(sbx.uploadArchive('/home/user/x', bytes), (e: unknown) => e instanceof InvalidRequestError && /outside the target/.test(e.message));
    fake.on('PUT', `${SB}/archive`, (_req, res) =>
      sendJson(res, 403, { error: { code: 'forbidden', message: "profile 'default': transfer.plugins does not list 'archive'" } }),
    );
    await assert.rejects(sbx.uploadArchive('/home/user/x', bytes), ForbiddenError);
  });

  it('downloads an archive as a Buffer or a stream, in the format asked for', async () => {
    const data = Buffer.from(Array.from({ length: 2500 }, (_, i) => i % 251));
    fake.on('GET', `${SB}/archive`, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      for (let i = 0; i < data.length; i += 1000) res.write(data.subarray(i, i + 1000));
      res.end();
    });
    const buffer = await sbx.downloadArchive('/home/user/results');
    assert.ok(buffer.equals(data));
    let req = fake.last('GET', `${SB}/archive`);
    assert.equal(req.query.get('path'), '/home/user/results');
    assert.equal(req.query.get('format'), 'tar.gz');
    const stream = await sbx.downloadArchive('out', { format: 'zip', stream: true });
    const parts: Buffer[] = [];
    for await (const chunk of stream) parts.push(chunk as Buffer);
    assert.ok(Buffer.concat(parts).equals(data));
    req = fake.last('GET', `${SB}/archive`);
    assert.equal(req.query.get('path'), '/home/user/out');
    assert.equal(req.query.get('format'), 'zip');
    const before = fake.requests.length;
    await assert.rejects(
      sbx.downloadArchive('/home/user/out', { format: 'rar' as never }),
      (e: unknown) => e instanceof InvalidRequestError && /tar\.zst/.test(e.message),
    );
    assert.equal(fake.requests.length, before, 'refused before sending');
  });
});
