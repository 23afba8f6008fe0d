// The /ui status page of `airlock serve` in headless Chromium (Debian's, driven by
// playwright-core): a supervisor on loopback TCP with a tenant token, one sandbox created
// through the API, and the page showing it once the token is entered; a wrong token shows an
// authorization error and no data. Needs root (the supervisor creates namespaces and cgroups),
// /usr/bin/chromium and `npm ci --prefix tests/ui`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const isRoot = process.getuid?.() === 0;
const mustRun = process.env.AIRLOCK_TEST_REQUIRE_PRIVILEGED === '1';
const skip = !isRoot && !mustRun
  ? 'needs root: airlock serve creates namespaces and cgroups'
  : false;

const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'ui-test-token-8e41d07b';
let dir, port, base, supervisor, browser /* a persistent context */, sandboxId, serveStderr = '';

async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const p = srv.address().port;
  await new Promise((r) => srv.close(r));
  return p;
}

function api(method, path, body, token = TOKEN) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
}

async function waitHealthy() {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (supervisor.exitCode !== null) {
      throw new Error(`airlock serve exited early (${supervisor.exitCode}):\n${serveStderr}`);
    }
    try {
      if ((await api('GET', '/healthz')).status === 200) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error('airlock serve did not come up in 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  if (skip) return;
  assert.ok(isRoot, 'needs real root and AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping');
  if (!existsSync(join(here, 'node_modules', 'playwright-core'))) {
    throw new Error('tests/ui/node_modules is missing: run `npm ci --prefix tests/ui`');
  }
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`);
  const bin = process.env.AIRLOCK_BIN;
  assert.ok(bin && existsSync(bin), `AIRLOCK_BIN must name the airlock binary (got '${bin}')`);
  dir = mkdtempSync(join(tmpdir(), 'airlock-ui-'));
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const sha = createHash('sha256').update(TOKEN).digest('hex');
  writeFileSync(join(dir, 'policy.toml'),
    `schema = 1\n[server]\nsocket = "${join(dir, 'airlock.sock')}"\n` +
    `state_dir = "${join(dir, 'state')}"\ntcp = "127.0.0.1:${port}"\n` +
    `[profiles.default]\n[profiles.analyst]\n` +
    `[tenants.acme]\ntoken_sha256 = "${sha}"\n`);
  supervisor = spawn(bin, ['serve', '--policy', join(dir, 'policy.toml')],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  supervisor.stderr.on('data', (c) => { serveStderr += c; });
  await waitHealthy();

  const created = await api('POST', '/v1/sandboxes', { profile: 'analyst', name: 'ui-shown' });
  assert.equal(created.status, 201, await created.clone().text());
  sandboxId = (await created.json()).id;

  const { chromium } = await import('playwright-core');
  // A fresh profile directory (--user-data-dir), which playwright takes as this argument.
  browser = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (sandboxId) await api('DELETE', `/v1/sandboxes/${sandboxId}`).catch(() => {});
  if (supervisor && supervisor.exitCode === null) {
    const exited = new Promise((r) => supervisor.once('exit', r));
    supervisor.kill('SIGTERM');
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// A page that fails the test on any script error or CSP violation it reports.
async function openPage() {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // The browser logs every non-2xx answer; the page handles those (401, and 404 from a
    // supervisor without per-sandbox metrics) itself.
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(m.text());
  });
  const res = await page.goto(`${base}/ui`);
  assert.equal(res.status(), 200);
  return { page, problems, headers: res.headers() };
}

async function enterToken(page, token) {
  await page.fill('#token', token);
  await page.click('#connect');
}

test('the page loads without a token, under a strict CSP, and holds no data', { skip },
  async () => {
    const { page, problems, headers } = await openPage();
    assert.match(headers['content-security-policy'], /default-src 'self'/);
    assert.doesNotMatch(headers['content-security-policy'], /unsafe-inline|unsafe-eval/);
    assert.equal(await page.locator('#sandboxes').isVisible(), false);
    assert.equal(await page.locator(`tr[data-sandbox="${sandboxId}"]`).count(), 0);
    // Its script and stylesheet are public too; anything else under /ui is 404.
    assert.equal((await fetch(`${base}/ui/ui.js`)).status, 200);
    assert.equal((await fetch(`${base}/ui/nope.js`)).status, 404);
    // The data is not: the API still wants the token.
    assert.equal((await fetch(`${base}/v1/sandboxes`)).status, 401);
    assert.deepEqual(problems, []);
    await page.close();
  });

test('with the tenant\'s token the page shows its sandbox with tenant and profile', { skip },
  async () => {
    const { page, problems } = await openPage();
    await enterToken(page, TOKEN);
    const row = page.locator(`tr[data-sandbox="${sandboxId}"]`);
    await row.waitFor({ timeout: 15_000 });
    const cells = await row.locator('td').allTextContents();
    // ID, Tenant, Profile, Backend, Age, State, CPU, Memory, Execution, Denials
    assert.equal(cells.length, 10, JSON.stringify(cells));
    assert.equal(cells[0], sandboxId);
    assert.equal(cells[1], 'acme');
    assert.equal(cells[2], 'analyst');
    assert.equal(cells[5], 'running');
    assert.equal(cells[9], 'review 0');
    // The /metrics summary is filled in from the live supervisor.
    assert.equal(await page.locator('#sum-sandboxes').textContent(), '1');
    assert.match(await page.locator('#sum-executions').textContent(), /^\d+$/);
    // The token stays in this tab's session storage, never in the page's address.
    assert.equal(await page.evaluate(() => sessionStorage.getItem('airlock.token')), TOKEN);
    assert.doesNotMatch(page.url(), new RegExp(TOKEN));
    assert.deepEqual(problems, []);
    await page.close();
  });

test('a wrong token shows an authorization error and no data', { skip }, async () => {
  const { page, problems } = await openPage();
  await enterToken(page, 'not-the-token');
  const status = page.locator('#status.error');
  await status.waitFor({ timeout: 15_000 });
  assert.match(await status.textContent(), /Not authorized: the bearer token is not valid/);
  assert.equal(await page.locator('#sandboxes').isVisible(), false);
  assert.equal(await page.locator('#sandboxes tbody tr').count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});
