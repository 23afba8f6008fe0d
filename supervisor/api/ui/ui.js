// The status page of `airlock serve` (docs/operations-view.md): the table `airlock top` shows,
// refreshed every two seconds, and a summary of GET /metrics. Read-only: it only ever GETs.
// The token stays in this tab's sessionStorage and goes out only as an Authorization header to
// this origin's API; the page itself (this file included) is public and holds no data.
'use strict';

const REFRESH_MS = 2000;
const TOKEN_KEY = 'airlock.token';
let timer = null;
let lastCpu = new Map();  // sandbox id -> {cpu_seconds, at}: CPU % is the delta between samples

function $(id) { return document.getElementById(id); }

function setStatus(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

// Shows or hides everything that displays the supervisor's data.
function showData(visible) {
  $('summary').hidden = !visible;
  $('sandboxes').hidden = !visible;
  if (!visible) $('sandboxes').querySelector('tbody').replaceChildren();
}

async function api(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY) || '';
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch(path, { headers, cache: 'no-store', credentials: 'omit' });
  if (!res.ok) {
    let message = res.status + ' ' + res.statusText;
    try { message = (await res.json()).error.message || message; } catch (e) { /* not JSON */ }
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return res;
}

function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h' + String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd' + String(Math.floor(s / 3600) % 24).padStart(2, '0') + 'h';
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + units[i];
}

// GET /v1/sandboxes/{id}/metrics; null when the supervisor has no such route or the sandbox
// went away meanwhile (the columns then show "-").
async function sandboxMetrics(id) {
  try {
    return await (await api('/v1/sandboxes/' + encodeURIComponent(id) + '/metrics')).json();
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

// Sums the samples of Prometheus families whose name passes `wanted` (labels ignored).
function sumMetrics(text, wanted) {
  let total = 0, seen = false;
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && wanted(m[1], m[2] || '')) { total += Number(m[3]); seen = true; }
  }
  return seen ? total : null;
}

function metricsSummary(text) {
  const denials = sumMetrics(text, (n) => /^airlock_.*denials_total$/.test(n));
  return {
    sandboxes: sumMetrics(text, (n, l) => n === 'airlock_sandboxes' && !l.includes('"starting"')),
    executions: sumMetrics(text, (n) => n === 'airlock_executions_total'),
    // Older supervisors count review denials only among their rejections.
    denials: denials !== null ? denials
      : sumMetrics(text, (n, l) => n === 'airlock_rejections_total' && l.includes('denied')),
  };
}

function cell(text, numeric) {
  const td = document.createElement('td');
  td.textContent = text;
  if (numeric) td.className = 'num';
  return td;
}

function row(sb, metrics, now) {
  const tr = document.createElement('tr');
  tr.dataset.sandbox = sb.id;
  let cpu = '-', mem = '-';
  if (metrics) {
    const prev = lastCpu.get(sb.id);
    const at = Date.now();
    if (prev && at > prev.at)
      cpu = (100 * (metrics.cpu_seconds - prev.cpu_seconds) / ((at - prev.at) / 1000)).toFixed(1) + '%';
    lastCpu.set(sb.id, { cpu_seconds: metrics.cpu_seconds, at });
    mem = bytes(metrics.memory_bytes) +
      (metrics.memory_limit_bytes ? ' / ' + bytes(metrics.memory_limit_bytes) : '');
  }
  const ex = sb.current_execution;
  const exec = ex ? ex.kind + ' ' + duration(now - ex.started_at) : '-';
  const d = sb.recent_denials || {};
  const denials = d.review === undefined ? '-'
    : 'review ' + d.review + (d.network === undefined ? '' : ', network ' + d.network);
  for (const [text, numeric] of [
    [sb.id], [sb.tenant], [sb.profile], [sb.isolation], [duration(now - sb.created_at), true],
    [sb.state], [cpu, true], [mem, true], [exec], [denials]]) {
    tr.appendChild(cell(text, numeric));
  }
  return tr;
}

async function refresh() {
  try {
    const list = (await (await api('/v1/sandboxes')).json()).sandboxes || [];
    const metrics = await Promise.all(list.map((sb) => sandboxMetrics(sb.id)));
    const summary = metricsSummary(await (await api('/metrics')).text());
    const now = Date.now();
    $('sandboxes').querySelector('tbody').replaceChildren(
      ...list.map((sb, i) => row(sb, metrics[i], now)));
    $('sum-sandboxes').textContent = summary.sandboxes ?? list.length;
    $('sum-executions').textContent = summary.executions ?? '-';
    $('sum-denials').textContent = summary.denials ?? '-';
    $('sum-updated').textContent = new Date(now).toLocaleTimeString();
    showData(true);
    setStatus(list.length + ' sandbox' + (list.length === 1 ? '' : 'es'), false);
  } catch (e) {
    showData(false);
    lastCpu = new Map();
    setStatus((e.status === 401 ? 'Not authorized: ' : 'Error: ') + e.message, true);
  }
}

function start() {
  if (timer !== null) clearInterval(timer);
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

document.addEventListener('DOMContentLoaded', () => {
  $('auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token').value);
    $('token').value = '';
    lastCpu = new Map();
    start();
  });
  if (sessionStorage.getItem(TOKEN_KEY) !== null) start();
});
