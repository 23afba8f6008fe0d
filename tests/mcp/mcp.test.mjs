// airlock mcp driven by the official MCP TypeScript SDK client (Client + StdioClientTransport),
// against a real `airlock serve` that this test starts on a temporary socket, policy and state
// directory. Needs root (the supervisor creates namespaces and cgroups) and
// `npm ci --prefix tests/mcp`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const isRoot = process.getuid?.() === 0;
const mustRun = process.env.AIRLOCK_TEST_REQUIRE_PRIVILEGED === '1';
const skip = !isRoot && !mustRun
  ? 'needs root: airlock serve creates namespaces and cgroups'
  : false;

let sdk;  // the MCP SDK's modules, loaded once node_modules is known to exist
let dir, supervisor, client, transport, mcpStderr = '';

function supervisorGet(sock, path) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sock, path, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function waitHealthy(sock, child) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`airlock serve exited early (${child.exitCode})`);
    try {
      if ((await supervisorGet(sock, '/healthz')).status === 200) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error('airlock serve did not come up in 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function textOf(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

const call = (name, args = {}) => client.callTool({ name, arguments: args });

before(async () => {
  if (skip) return;
  assert.ok(isRoot, 'needs real root and AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping');
  if (!existsSync(join(here, 'node_modules', '@modelcontextprotocol', 'sdk'))) {
    throw new Error('tests/mcp/node_modules is missing: run `npm ci --prefix tests/mcp`');
  }
  const bin = process.env.AIRLOCK_BIN;
  assert.ok(bin && existsSync(bin), `AIRLOCK_BIN must name the airlock binary (got '${bin}')`);
  sdk = {
    ...(await import('@modelcontextprotocol/sdk/client/index.js')),
    ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
  };
  dir = mkdtempSync(join(tmpdir(), 'airlock-mcp-'));
  const sock = join(dir, 'airlock.sock');
  writeFileSync(join(dir, 'policy.toml'),
    `schema = 1\n[server]\nsocket = "${sock}"\nstate_dir = "${join(dir, 'state')}"\n` +
    // A review chain, so a denial reaches the MCP client as a tool error naming rule and reason.
    '[profiles.default.review]\nchain = ["patterns"]\n' +
    '[[profiles.default.review.patterns.rules]]\nid = "py-ctypes"\npattern = \'\\bctypes\\b\'\n' +
    'reason = "native calls are not allowed"\nlanguages = ["python"]\n');
  supervisor = spawn(bin, ['serve', '--policy', join(dir, 'policy.toml')],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitHealthy(sock, supervisor);

  transport = new sdk.StdioClientTransport({
    command: bin,
    args: ['mcp'],
    env: { ...process.env, AIRLOCK_URL: `unix://${sock}` },
    stderr: 'pipe',
  });
  transport.stderr.on('data', (c) => { mcpStderr += c; });
  client = new sdk.Client({ name: 'airlock-e2e', version: '1.0.0' });
  await client.connect(transport);
});

after(async () => {
  // Closing the client closes airlock mcp's stdin: it must end every sandbox it created.
  if (client) await client.close();
  if (supervisor && supervisor.exitCode === null) {
    const sock = join(dir, 'airlock.sock');
    const left = await supervisorGet(sock, '/v1/sandboxes');
    const exited = new Promise((r) => supervisor.once('exit', r));
    supervisor.kill('SIGTERM');
    await exited;
    assert.deepEqual(JSON.parse(left.body).sandboxes, [],
      `airlock mcp left sandboxes behind; its stderr:\n${mcpStderr}`);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('initialize negotiated the SDK\'s protocol and the server answers ping', { skip }, async () => {
  assert.equal(client.getServerVersion().name, 'airlock');
  assert.ok(client.getServerCapabilities().tools);
  assert.deepEqual(await client.ping(), {});
});

test('tools/list has every tool with an object schema', { skip }, async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [
    'create_sandbox', 'end_sandbox', 'list_files', 'read_file', 'run_code', 'run_command',
    'transfer_in', 'transfer_out', 'write_file']);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.ok(t.description.length > 40, t.name);
  }
});

test('run_code keeps state and returns a matplotlib figure as a PNG image', { skip }, async () => {
  let r = await call('run_code', { code: 'x = 41\nprint("hello from airlock")' });
  assert.equal(r.isError, false, textOf(r));
  assert.match(textOf(r), /stdout:\nhello from airlock\n/);
  r = await call('run_code', { code: 'x + 1' });
  assert.match(textOf(r), /result:\n42/);

  r = await call('run_code', {
    code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("airlock")',
  });
  assert.equal(r.isError, false, textOf(r));
  const images = r.content.filter((c) => c.type === 'image');
  assert.equal(images.length, 1, JSON.stringify(r.content).slice(0, 500));
  assert.equal(images[0].mimeType, 'image/png');
  const png = Buffer.from(images[0].data, 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.ok(png.length > 1000, `a real plot, not a stub (${png.length} bytes)`);
});

test('run_code in node, a raised error, and a language the profile does not know', { skip }, async () => {
  let r = await call('run_code', { code: 'console.log(6 * 7)', language: 'node' });
  assert.equal(r.isError, false, textOf(r));
  assert.match(textOf(r), /42/);
  r = await call('run_code', { code: '1 / 0' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /ZeroDivisionError: division by zero/);
  r = await call('run_code', { code: 'DISPLAY "HI"', language: 'cobol' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /cobol/);
});

test('run_command reports exit code and output', { skip }, async () => {
  let r = await call('run_command', { command: 'echo out; echo err >&2; id -u' });
  assert.equal(r.isError, false, textOf(r));
  assert.match(textOf(r), /^exit code: 0\n\nstdout:\nout\n\d+\n/);
  assert.match(textOf(r), /stderr:\nerr\n/);
  r = await call('run_command', { command: 'exit 3' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /exit code: 3/);
});

test('write_file, read_file and list_files, text and binary', { skip }, async () => {
  let r = await call('write_file', { path: '/home/user/notes.txt', content: 'héllo\n' });
  assert.equal(r.isError, false, textOf(r));
  r = await call('read_file', { path: '/home/user/notes.txt' });
  assert.deepEqual(r.content, [{ type: 'text', text: 'héllo\n' }]);

  const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0x10]);
  r = await call('write_file', {
    path: '/home/user/blob.png', content: bytes.toString('base64'), encoding: 'base64' });
  assert.equal(r.isError, false, textOf(r));
  r = await call('read_file', { path: '/home/user/blob.png' });
  assert.equal(r.content[0].type, 'resource');
  assert.equal(r.content[0].resource.mimeType, 'image/png');
  assert.deepEqual(Buffer.from(r.content[0].resource.blob, 'base64'), bytes);

  r = await call('list_files', {});
  assert.match(textOf(r), /file\t6\tblob.png|file\t7\tblob.png/);
  assert.match(textOf(r), /notes.txt/);

  r = await call('read_file', { path: '/home/user/missing.txt' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /not found|No such file|ENOENT/i);
});

test('create_sandbox, use it by id and name, end it', { skip }, async () => {
  let r = await call('create_sandbox', { name: 'mcp-e2e-second', language: 'python' });
  assert.equal(r.isError, false, textOf(r));
  const id = r.structuredContent.sandbox_id;
  assert.match(id, /^[0-9a-f]{16}$/);
  assert.ok(textOf(r).startsWith(`sandbox_id: ${id}\n`));

  r = await call('run_code', { code: 'y = 7\ny * 6', sandbox_id: id });
  assert.match(textOf(r), /result:\n42/);
  r = await call('run_code', { code: "'y' in globals()" });
  assert.match(textOf(r), /result:\nFalse/, 'the default sandbox is a different interpreter');
  r = await call('run_command', { command: 'true', sandbox_id: 'mcp-e2e-second' });
  assert.equal(r.isError, false, textOf(r));

  r = await call('end_sandbox', { sandbox_id: id });
  assert.equal(textOf(r), `ended sandbox ${id}`);
  r = await call('run_code', { code: '1', sandbox_id: id });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /not found/);
});

test('code the review chain denies is an error result naming reviewer, rule and reason', { skip }, async () => {
  const r = await call('run_code', { code: 'import ctypes\nprint("ran")' });
  assert.equal(r.isError, true);
  assert.match(textOf(r),
    /^Denied by airlock's review \(reviewer 'patterns', rule 'py-ctypes'\): native calls are not allowed\. Nothing was run\./);
  assert.doesNotMatch(textOf(r), /ran/);
  // Positive control: the same sandbox still runs code the chain allows.
  const ok = await call('run_code', { code: 'print("ran")' });
  assert.equal(ok.isError, false, textOf(ok));
  assert.match(textOf(ok), /stdout:\nran\n/);
});

test('unknown sandbox, bad arguments and unknown tools', { skip }, async () => {
  let r = await call('run_command', { command: 'ls', sandbox_id: 'no-such-sandbox' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /sandbox 'no-such-sandbox' not found/);
  r = await call('run_code', { code: 42 });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /argument 'code' must be a string/);
  await assert.rejects(call('format_disk', {}), /unknown tool: format_disk/);
});
