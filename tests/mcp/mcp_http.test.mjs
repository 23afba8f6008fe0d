// MCP over Streamable HTTP: the official MCP TypeScript SDK client (Client +
// StreamableHTTPClientTransport) against `/mcp` of a real `airlock serve` that this test starts
// on loopback TCP with a tenant token. Needs root (the supervisor creates namespaces and
// cgroups) and `npm ci --prefix tests/mcp`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const isRoot = process.getuid?.() === 0;
const mustRun = process.env.AIRLOCK_TEST_REQUIRE_PRIVILEGED === '1';
const skip = !isRoot && !mustRun
  ? 'needs root: airlock serve creates namespaces and cgroups'
  : false;

const TOKEN = 'mcp-http-test-token-3f9c2a';
let sdk, dir, sock, port, supervisor, client, transport, serveStderr = '';

function get(path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sock, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const p = srv.address().port;
  await new Promise((r) => srv.close(r));
  return p;
}

async function waitHealthy() {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (supervisor.exitCode !== null) {
      throw new Error(`airlock serve exited early (${supervisor.exitCode}):\n${serveStderr}`);
    }
    try {
      if ((await get('/healthz')).status === 200) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error('airlock serve did not come up in 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The sandboxes of tenant "remote", seen through the REST API with its token.
async function remoteSandboxes() {
  const r = await fetch(`http://127.0.0.1:${port}/v1/sandboxes`,
    { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(r.status, 200);
  return (await r.json()).sandboxes;
}

const jsonHeaders = { 'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream', Authorization: `Bearer ${TOKEN}` };
const initBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text)
  .join('');
const mcpUrl = () => new URL(`http://127.0.0.1:${port}/mcp`);
const withToken = (token) => ({ requestInit: { headers: { Authorization: `Bearer ${token}` } } });

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
    ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
  };
  dir = mkdtempSync(join(tmpdir(), 'airlock-mcp-http-'));
  sock = join(dir, 'airlock.sock');
  port = await freePort();
  const sha = createHash('sha256').update(TOKEN).digest('hex');
  writeFileSync(join(dir, 'policy.toml'),
    `schema = 1\n[server]\nsocket = "${sock}"\nstate_dir = "${join(dir, 'state')}"\n` +
    `tcp = "127.0.0.1:${port}"\n` +
    // Small bounds so the tests can reach them: 3 sessions per tenant, 2 s idle.
    'mcp_max_sessions_per_tenant = 3\nmcp_idle_timeout_s = 2\n' +
    `[tenants.remote]\ntoken_sha256 = "${sha}"\n`);
  supervisor = spawn(bin, ['serve', '--policy', join(dir, 'policy.toml')],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  supervisor.stderr.on('data', (c) => { serveStderr += c; });
  await waitHealthy();

  transport = new sdk.StreamableHTTPClientTransport(mcpUrl(), withToken(TOKEN));
  client = new sdk.Client({ name: 'airlock-http-e2e', version: '1.0.0' });
  await client.connect(transport);
});

after(async () => {
  if (client) await client.close().catch(() => {});
  if (supervisor && supervisor.exitCode === null) {
    const exited = new Promise((r) => supervisor.once('exit', r));
    supervisor.kill('SIGTERM');
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('initialize over HTTP opens a session and tools/list has the catalog', { skip }, async () => {
  assert.equal(client.getServerVersion().name, 'airlock');
  assert.match(transport.sessionId, /^[0-9a-f]{64}$/);
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === 'run_code'), JSON.stringify(tools.map((t) => t.name)));
  assert.deepEqual(await client.ping(), {});
});

test('tools/call runs Python in the tenant\'s sandbox and keeps state', { skip }, async () => {
  let r = await client.callTool({ name: 'run_code', arguments: { code: 'x = 41\nprint("hi")' } });
  assert.equal(r.isError, false, textOf(r));
  assert.match(textOf(r), /stdout:\nhi\n/);
  r = await client.callTool({ name: 'run_code', arguments: { code: 'x + 1' } });
  assert.match(textOf(r), /result:\n42/);
  // The default sandbox belongs to the token's tenant, as over REST.
  assert.equal((await remoteSandboxes()).length, 1);
});

test('wrong or missing token is 401; requests without a session are refused', { skip },
  async () => {
    const bad = new sdk.Client({ name: 'intruder', version: '1' });
    await assert.rejects(
      bad.connect(new sdk.StreamableHTTPClientTransport(mcpUrl(), withToken('wrong'))),
      (e) => e.code === 401 && /bearer token is not valid/.test(e.message));
    const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    const headers = { 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream' };
    let r = await fetch(mcpUrl(), { method: 'POST', headers, body: init });
    assert.equal(r.status, 401);
    // A session id does not cross tenants or survive a made-up value.
    r = await fetch(mcpUrl(), { method: 'POST',
      headers: { ...headers, Authorization: `Bearer ${TOKEN}`, 'Mcp-Session-Id': 'f'.repeat(64) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    assert.equal(r.status, 404);
    r = await fetch(mcpUrl(), { method: 'POST',
      headers: { ...headers, Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    assert.equal(r.status, 400);
    // A browser page of another origin is refused (DNS rebinding).
    r = await fetch(mcpUrl(), { method: 'POST',
      headers: { ...headers, Authorization: `Bearer ${TOKEN}`, Origin: 'http://evil.example' },
      body: init });
    assert.equal(r.status, 403);
    r = await fetch(mcpUrl(), { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(r.status, 405);
    // A refused initialize opens no session.
    r = await fetch(mcpUrl(), { method: 'POST', headers: jsonHeaders,
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'initialize', params: {} }) });
    assert.equal(r.status, 200);
    assert.match((await r.json()).error.message, /protocolVersion/);
    assert.equal(r.headers.get('mcp-session-id'), null);
  });

test('deleting the session ends its sandbox and the session id', { skip }, async () => {
  const id = transport.sessionId;
  await transport.terminateSession();
  assert.deepEqual(await remoteSandboxes(), [], `its sandbox is gone:\n${serveStderr}`);
  const r = await fetch(mcpUrl(), { method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${TOKEN}`, 'Mcp-Session-Id': id },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }) });
  assert.equal(r.status, 404);
});

test('sessions are bounded per tenant and end, with their sandboxes, when idle', { skip },
  async () => {
    // The client's session was deleted above: the tenant has none.
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const r = await fetch(mcpUrl(), { method: 'POST', headers: jsonHeaders, body: initBody });
      assert.equal(r.status, 200);
      ids.push(r.headers.get('mcp-session-id'));
    }
    let r = await fetch(mcpUrl(), { method: 'POST', headers: jsonHeaders, body: initBody });
    assert.equal(r.status, 429);
    assert.match((await r.json()).error.message, /server\.mcp_max_sessions_per_tenant/);

    // One session runs code (its default sandbox), then every session goes quiet.
    r = await fetch(mcpUrl(), { method: 'POST', headers: { ...jsonHeaders, 'Mcp-Session-Id': ids[0] },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call',
        params: { name: 'run_code', arguments: { code: 'print(6 * 7)' } } }) });
    assert.equal(r.status, 200);
    assert.match(JSON.stringify(await r.json()), /42/);
    assert.equal((await remoteSandboxes()).length, 1);

    const deadline = Date.now() + 10_000;
    while ((await remoteSandboxes()).length > 0) {
      assert.ok(Date.now() < deadline, `the idle session kept its sandbox:\n${serveStderr}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    r = await fetch(mcpUrl(), { method: 'POST', headers: { ...jsonHeaders, 'Mcp-Session-Id': ids[0] },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }) });
    assert.equal(r.status, 404);
    r = await fetch(mcpUrl(), { method: 'POST', headers: jsonHeaders, body: initBody });
    assert.equal(r.status, 200, 'idle sessions no longer count against the bound');
  });
