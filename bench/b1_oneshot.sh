#!/usr/bin/env bash
# B1 one-shot (docs/performance.md, bench/README.md): `airlock run` of
# print(1) / console.log(1) / true, cold (a new sandbox per run), default policy, measured side by
# side with the bare interpreter, bwrap --unshare-all, runsc do and firejail in the same run.
# "bwrap+pid1" is bwrap with a minimal static PID 1 (bench/floor/min_pid1.cc) in front of the
# program: the floor of any design that, like airlock's, execs an agent between the two.
#
# Usage: bench/b1_oneshot.sh [--smoke] [--warm] [--runs N] [--airlock PATH]
#                            [--langs "python node shell pandas"] [--json FILE]
#   --smoke   3 runs, Python only (CI keeps the script working with this; < 30 s); with --warm,
#             2 rounds, no warm-up, of python, node and pandas, bare / airlock / airlock-warm only
#             (< 1 min)
#   --warm    also the rows served warm: start `airlock serve` on a private socket with a policy
#             that keeps pre-started interpreters (pool_size 2, preload pandas, matplotlib.pyplot)
#             and add the runner airlock-warm (`AIRLOCK_URL=unix://SOCK airlock run`), and the
#             language "pandas": examples/summarize_spending.py, bare / airlock / airlock-warm
#   --runs N  timed runs per command (default 30), after 2 warm-up runs (1 with --smoke)
#   --json    also write every measurement as JSON to FILE
# Needs root (airlock creates namespaces and cgroups). Commands of one language are timed in
# interleaved rounds (shuffled order each round). A comparison that cannot run here is listed
# with the reason. Exits non-zero on errors only (a target missed is not one).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=""
warmup=2
langs=""
smoke=false
warm=false
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
min_pid1="$repo/build/bench/airlock_min_pid1"
json_out=""
py=/usr/bin/python3
# Every command runs with the same minimal environment airlock gives its programs: a host variable
# such as NODE_EXTRA_CA_CERTS (which makes node parse a CA bundle at start) would otherwise tax
# the comparisons and not airlock.
clean_env=(env -i "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
           "HOME=${HOME:-/root}" "LANG=C.UTF-8")

while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; shift ;;
    --warm) warm=true; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --airlock) airlock="$2"; shift 2 ;;
    --langs) langs="${2//,/ }"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "b1: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if $smoke; then
  warmup=1
  if $warm; then warmup=0; runs="${runs:-2}"; langs="${langs:-python node pandas}"; fi
  runs="${runs:-3}"; langs="${langs:-python}"
fi
runs="${runs:-30}"
if $warm; then langs="${langs:-python node shell pandas}"; fi
langs="${langs:-python node shell}"
if ! $warm && [[ " $langs " == *" pandas "* ]]; then
  echo "b1: the pandas rows need --warm" >&2
  exit 2
fi

# The cold rows must stay cold when an `airlock serve` is running on the host: `airlock run`
# would send its program there (AIRLOCK_URL, else the default socket). --local keeps it in
# this process; a build from before served runs has no such flag and always runs locally.
# (Not `| grep -q`: grep's early exit can end airlock with SIGPIPE, which pipefail reports.)
local_flag=""
run_help="$("$airlock" run --help 2>/dev/null)" || true
if [[ "$run_help" == *--local* ]]; then local_flag="--local"; fi
example="$repo/examples/summarize_spending.py"
csv="$repo/examples/data/transactions.csv"

work="$(mktemp -d /tmp/airlock-b1-XXXXXX)"

# On cgroup v1/hybrid hosts each sandbox is moved into its v1 cgroups after clone, and the kernel
# waits an RCU grace period for that unless a cgroup root has `favordynmods` (see
# `airlock doctor`). The "airlock-fdm" row measures airlock with that host setting turned on for
# its duration only; the original cgroup2 options are put back on exit, however the script ends.
cg2="$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)"
cg2_opts_before=""
fdm_row=false
if [[ -n "$cg2" ]] && awk '$3 == "cgroup" {found=1} END {exit !found}' /proc/mounts &&
   ! grep -q "^cgroup2 $cg2 .*favordynmods" /proc/mounts && [[ $(id -u) -eq 0 ]]; then
  cg2_opts_before="$(awk -v m="$cg2" '$2 == m {print $4}' /proc/mounts)"
  fdm_row=true
fi
# Sets the cgroup2 mount's own options exactly (mount(8) would merge in the old ones).
set_cg2_opts() {
  "$py" - "$cg2" "$1" <<'EOF'
import ctypes, os, sys
keep = {"nsdelegate", "memory_localevents", "memory_recursiveprot", "memory_hugetlb_accounting",
        "favordynmods"}
data = ",".join(o for o in sys.argv[2].split(",") if o in keep).encode()
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(None, sys.argv[1].encode(), b"cgroup2", 32, data) != 0:  # MS_REMOUNT
    sys.exit("b1: remount " + sys.argv[1] + ": " + os.strerror(ctypes.get_errno()))
EOF
}

# --warm: the supervisor that serves the airlock-warm rows. Its pid is ours to stop; it destroys
# every sandbox it holds on SIGTERM.
serve_pid=""
sock="$work/serve.sock"
warm_policy="$work/warm-policy.toml"
pool_size=2
stop_serve() {
  [[ -n "$serve_pid" ]] || return 0
  kill -TERM "$serve_pid" 2>/dev/null || true
  local i state
  for ((i = 0; i < 600; i++)); do
    # Gone, or a zombie (our child until `wait`): stopped.
    state="$(sed 's/.*) //' "/proc/$serve_pid/stat" 2>/dev/null | cut -d' ' -f1)" || state=""
    [[ -z "$state" || "$state" == Z ]] && break
    sleep 0.1
  done
  if [[ -n "$state" && "$state" != Z ]]; then
    echo "b1: airlock serve (pid $serve_pid) did not stop within 60 s; killing it" >&2
    kill -KILL "$serve_pid" 2>/dev/null || true
  fi
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
}
cleanup() {
  stop_serve || true
  if [[ -n "$cg2_opts_before" ]]; then set_cg2_opts "$cg2_opts_before"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The program of each language, bare, and what it must print.
# "pandas" is the README's example job (scripts/setup.sh): bare, the CSV is its argument; through
# airlock it is copied in with --file to where the script looks by default.
bare_cmd() {
  case "$1" in
    python) printf '%s\n' "/usr/bin/python3 -c print(1)" ;;
    node) printf '%s\n' "/usr/bin/node -e console.log(1)" ;;
    shell) printf '%s\n' "/usr/bin/bash -c true" ;;
    pandas) printf '%s\n' "/usr/bin/python3 $example $csv" ;;
  esac
}
expected_out() {
  case "$1" in
    shell) echo "" ;;
    pandas) cat "$work/expected.pandas" ;;
    *) echo "1" ;;
  esac
}
airlock_code() { case "$1" in python) echo "print(1)" ;; node) echo "console.log(1)" ;; shell) echo "true" ;; esac; }

# Runners: name and the prefix put before the bare command (airlock is special-cased).
runners="bare airlock bwrap bwrap+pid1 runsc firejail"
if $fdm_row; then runners="bare airlock airlock-fdm bwrap bwrap+pid1 runsc firejail"; fi
if $warm; then runners="$runners airlock-warm"; fi
# CI's plain --smoke keeps the other runners working; --warm --smoke keeps to what it adds.
if $warm && $smoke; then runners="bare airlock airlock-warm"; fi
# The example is compared with itself run bare, cold and warm only (bwrap's --tmpfs /tmp would
# hide a repository under /tmp).
runners_of() {
  if [[ "$1" == pandas ]]; then echo "bare airlock airlock-warm"; else echo "$runners"; fi
}
prefix() {
  case "$1" in
    bare) echo "" ;;
    bwrap) echo "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --" ;;
    # The binary is bound into bwrap's /tmp: the repository may itself be under /tmp.
    bwrap+pid1) echo "$(prefix bwrap | sed 's/ --$//') --ro-bind $min_pid1 /tmp/airlock-min-pid1 -- /tmp/airlock-min-pid1" ;;
    runsc) echo "runsc --network=none do" ;;
    firejail) echo "firejail --quiet --noprofile" ;;
  esac
}

# argv of one runner for one language, one word per line (no shell quoting needed). The warm
# runs print their --json record: it tells a run served by a pre-started interpreter
# (timing_ms.create 0) from one the supervisor had to create a sandbox for.
argv_of() {
  local runner="$1" lang="$2"
  local -a args
  case "$runner" in
    airlock|airlock-fdm|airlock-warm)
      args=("$airlock" run --no-stdin)
      if [[ "$runner" == airlock-warm ]]; then args+=(--json); elif [[ -n "$local_flag" ]]; then
        args+=("$local_flag")
      fi
      if [[ "$lang" == pandas ]]; then
        args+=(--file "$csv:transactions.csv" "$example")
      else
        args+=(--lang "$lang" -c "$(airlock_code "$lang")")
      fi
      printf '%s\n' "${args[@]}" ;;
    *)
      # shellcheck disable=SC2046
      printf '%s\n' $(prefix "$runner") $(bare_cmd "$lang") ;;
  esac
}
# The environment of a runner: the minimal one, and the supervisor's address for airlock-warm.
env_of() {
  printf '%s\n' "${clean_env[@]}"
  if [[ "$1" == airlock-warm ]]; then echo "AIRLOCK_URL=unix://$sock"; fi
}

# Runs one command once and explains why it cannot be benchmarked, or prints nothing.
preflight() {
  local runner="$1" lang="$2" out err rc
  local -a argv
  mapfile -t argv < <(argv_of "$runner" "$lang")
  if ! command -v "${argv[0]}" >/dev/null 2>&1 && [[ ! -x "${argv[0]}" ]]; then
    echo "not installed (${argv[0]})"
    return
  fi
  if [[ "$runner" == bwrap+pid1 && ! -x "$min_pid1" ]]; then
    echo "not built ($min_pid1)"
    return
  fi
  if [[ "$runner" == airlock* && $(id -u) -ne 0 ]]; then
    echo "needs root"
    return
  fi
  if [[ "$runner" == airlock-warm && "$lang" == shell ]]; then
    echo "no pre-started shell (docs/policy.md, Pre-started interpreters)"
    return
  fi
  local -a envv
  mapfile -t envv < <(env_of "$runner")
  set +e
  out="$("${envv[@]}" timeout 120 "${argv[@]}" </dev/null 2>"$work/preflight.err")"
  rc=$?
  set -e
  if [[ $rc -eq 0 && "$runner" == airlock-warm ]]; then
    # Its output is in the record, which also says whether this supervisor served it.
    out="$("$py" "$work/b1_serve.py" check-record "$work" <<<"$out" 2>"$work/preflight.err")" ||
      rc=125
  fi
  if [[ $rc -ne 0 ]]; then
    err="$(grep -v '^\s*$' "$work/preflight.err" | tail -n 1 | cut -c1-90)"
    echo "fails here: exit $rc${err:+: $err}"
  elif [[ "$out" != "$(expected_out "$lang")" ]]; then
    echo "wrong output: '$(printf '%s' "$out" | head -c 40)'"
  elif [[ "$runner" == airlock-warm ]] &&
       ! "$py" "$work/b1_serve.py" wait-full "$work" 2>"$work/preflight.err"; then
    # It took a pre-started interpreter: the timed rounds start with full pools.
    echo "the pools did not refill: $(tail -n 1 "$work/preflight.err" | cut -c1-80)"
  fi
}

# Times every runner of one language, interleaved: each round runs every command once, in a
# shuffled order, so a noisy machine's drift falls on all of them alike and the ratios stay
# meaningful. Writes "runner<TAB>t1,t2,...<TAB>note" (seconds) lines to $2; argv files are in
# $work. The airlock-fdm runs get favordynmods on the cgroup2 root just around each run
# (untimed). After each airlock-warm run, untimed, the supervisor refills its pools and goes
# idle again before the next command starts (b1_serve.py wait-full), so every warm run can find
# a pre-started interpreter and no refill competes with the next command for CPU; the note
# counts the timed warm runs that were served by a sandbox created for them instead.
measure_interleaved() {
  local lang="$1" out="$2"
  "${clean_env[@]}" "$py" - "$warmup" "$runs" "$work" "$cg2" "$cg2_opts_before" "$lang" \
    "${ok_runners[@]}" >"$out" <<'EOF'
import ctypes, os, random, subprocess, sys, time
warmup, runs, work, cg2, cg2_opts, lang = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:7]
runners = sys.argv[7:]
argv = {r: open(f"{work}/argv.{lang}.{r}").read().split("\0")[:-1] for r in runners}
served_cold = 0
if "airlock-warm" in runners:
    sys.path.insert(0, work)
    import b1_serve
    serve = b1_serve.Serve(work)
    warm_env = dict(os.environ, AIRLOCK_URL="unix://" + serve.sock)
    expected = open(f"{work}/expected.{lang}").read()
keep = {"nsdelegate", "memory_localevents", "memory_recursiveprot", "memory_hugetlb_accounting"}
libc = ctypes.CDLL(None, use_errno=True)
def cg2_set(favor):
    opts = [o for o in cg2_opts.split(",") if o in keep] + (["favordynmods"] if favor else [])
    if libc.mount(None, cg2.encode(), b"cgroup2", 32, ",".join(opts).encode()) != 0:
        sys.exit(f"b1: remount {cg2}: {os.strerror(ctypes.get_errno())}")
times = {r: [] for r in runners}
for i in range(warmup + runs):
    order = runners[:]
    random.shuffle(order)
    for r in order:
        fdm = r == "airlock-fdm"
        if fdm:
            cg2_set(True)
        if r == "airlock-warm":
            t = time.perf_counter()
            p = subprocess.run(argv[r], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, check=True, env=warm_env)
            dt = time.perf_counter() - t
            stdout, warm = serve.check_record(p.stdout)
            if stdout != expected:
                sys.exit(f"b1: airlock-warm {lang}: wrong output {stdout[:60]!r}")
            if i >= warmup and not warm:
                served_cold += 1
            serve.wait_full()
        else:
            t = time.perf_counter()
            subprocess.run(argv[r], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            dt = time.perf_counter() - t
        if fdm:
            cg2_set(False)
        if i >= warmup:
            times[r].append(dt)
for r in runners:
    note = f"{served_cold}/{runs} served cold" if r == "airlock-warm" else ""
    print(r + "\t" + ",".join(f"{x:.6f}" for x in times[r]) + "\t" + note)
EOF
}

# --warm: what the airlock-warm rows need from their supervisor, in Python for the timing loop.
if $warm; then
  cat >"$work/b1_serve.py" <<'EOF'
"""b1_oneshot.sh --warm: the `airlock serve` that serves the airlock-warm rows.

  ready WORK POOL_SIZE  wait for /healthz, then for full pools; says how long that took and how
                        it was told
  wait-full WORK        wait until its pools are full again and it is idle
  check-record WORK     read an `airlock run --json` record on stdin, check that it ran well and
                        was served by this supervisor; print the program's stdout
"""
import http.client, json, os, re, socket, sys, time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def get(sock, path):
    c = UnixHTTP(sock)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def tree_cpu_ns(root):
    """CPU time used so far by every thread of `root` and of its live descendants, ns."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(d))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


# A gauge of pre-started interpreters in /metrics, if the supervisor has one.
GAUGE = re.compile(r"^(airlock_\w*prestart\w*)(\{[^}]*\})?\s+(\S+)$")


class Serve:
    def __init__(self, work):
        self.sock = os.path.join(work, "serve.sock")
        self.policy = os.path.join(work, "warm-policy.toml")
        with open(os.path.join(work, "serve.pid")) as f:
            self.pid = int(f.read())
        self.conf = os.path.join(work, "serve.json")
        conf = {}
        if os.path.exists(self.conf):
            with open(self.conf) as f:
                conf = json.load(f)
        self.gauge, self.target = conf.get("gauge"), conf.get("target", 0)

    def check(self, deadline, what):
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            alive = False
        if not alive:
            sys.exit(f"b1: airlock serve (pid {self.pid}) exited while {what}")
        if time.monotonic() > deadline:
            sys.exit(f"b1: timed out {what}")

    def gauges(self):
        text = get(self.sock, "/metrics")[1]
        kinds = dict(line.split()[2:4] for line in text.splitlines()
                     if line.startswith("# TYPE ") and len(line.split()) >= 4)
        found = {}
        for line in text.splitlines():
            m = GAUGE.match(line)
            if m and kinds.get(m.group(1)) == "gauge":
                found[m.group(1)] = found.get(m.group(1), 0) + float(m.group(3))
        return found

    def ready(self, pool_size, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            self.check(deadline, "waiting for GET /healthz")
            try:
                if get(self.sock, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        found = self.gauges()
        if found:  # python and node, preloaded and plain: pool_size pre-started of each
            self.gauge, self.target = sorted(found)[0], 4 * pool_size
        with open(self.conf, "w") as f:
            json.dump({"gauge": self.gauge, "target": self.target}, f)
        t0 = time.monotonic()
        self.wait_full(timeout=300)  # the first imports of pandas may read from disk
        how = (f"{self.gauge} = {self.target}, then idle" if self.gauge else
               "idle; /metrics has no pre-started gauge")
        return f"{time.monotonic() - t0:.1f} s ({how})"

    def wait_full(self, timeout=120):
        deadline = time.monotonic() + timeout
        while self.gauge and self.gauges().get(self.gauge, 0) < self.target:
            self.check(deadline, f"waiting for {self.gauge} to reach {self.target}")
            time.sleep(0.05)
        # Then idle: the supervisor and everything it started used less than 2 % of a CPU in
        # two 100 ms windows in a row. Filling a pool keeps a CPU busy (starting a sandbox,
        # importing pandas); between two fills there is no pause that long.
        quiet, last = 0, tree_cpu_ns(self.pid)
        while quiet < 2:
            self.check(deadline, "waiting for the supervisor to refill its pools and go idle")
            time.sleep(0.1)
            now = tree_cpu_ns(self.pid)
            quiet = quiet + 1 if 0 <= now - last < 2_000_000 else 0
            last = now

    def check_record(self, raw):
        """(stdout, served warm) of the --json record of a run this supervisor served."""
        rec = json.loads(raw)
        if rec.get("exit_code") != 0:
            sys.exit(f"b1: the run failed: {rec.get('status')}: {rec.get('message')}")
        source = (rec.get("policy") or {}).get("source") or ""
        if os.path.realpath(source) != os.path.realpath(self.policy):
            sys.exit(f"b1: the run was not served by the benchmark's supervisor (policy "
                     f"'{source}')")
        timing = rec.get("timing_ms") or {}
        # A pre-started interpreter's sandbox was created before the request: no create.
        return rec.get("stdout", ""), timing.get("create") == 0 and not timing.get("create_steps")


if __name__ == "__main__":
    command, serve = sys.argv[1], Serve(sys.argv[2])
    if command == "ready":
        print(serve.ready(int(sys.argv[3])))
    elif command == "wait-full":
        serve.wait_full()
    elif command == "check-record":
        sys.stdout.write(serve.check_record(sys.stdin.read())[0])
EOF
fi

# --warm: a supervisor with pre-started interpreters, on a private socket. The profile is the
# built-in default's (the cold rows' policy) with a pool of pre-started interpreters added.
start_serve() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "b1: --warm needs root (it starts airlock serve)" >&2
    exit 1
  fi
  if [[ -z "$local_flag" ]]; then
    echo "b1: --warm: $airlock cannot send a run to airlock serve (no \`airlock run --local\`)" >&2
    exit 1
  fi
  cat >"$warm_policy" <<EOF
schema = 1

[server]
max_sandboxes = 64

[profiles.default]
languages = ["python", "node", "shell"]

[profiles.default.lifetime]
pool_size = $pool_size
prestart = true
preload = ["pandas", "matplotlib.pyplot"]
fast_exit = true
EOF
  "${clean_env[@]}" "$airlock" serve --socket "$sock" --policy "$warm_policy" \
    >"$work/serve.log" 2>&1 &
  serve_pid=$!
  echo "$serve_pid" >"$work/serve.pid"
  local fill
  if ! fill="$("$py" "$work/b1_serve.py" ready "$work" "$pool_size")"; then
    echo "b1: airlock serve did not get ready; the end of its log:" >&2
    tail -n 20 "$work/serve.log" >&2
    exit 1
  fi
  echo "warm: airlock serve (pid $serve_pid), pool_size $pool_size, prestart, preload pandas" \
       "matplotlib.pyplot, fast_exit; pools full after $fill"
}

echo "B1 one-shot: $runs runs per command after $warmup warm-up, $(nproc) CPUs, kernel $(uname -r)"
echo "airlock: $airlock${local_flag:+ (cold rows: run $local_flag)}"
echo "timer: interleaved rounds in shuffled order (python perf_counter around each run)"
if $warm; then start_serve; fi
echo

results="$work/results.tsv"
: >"$results"
for lang in $langs; do
  ok_runners=()
  if [[ "$lang" == pandas ]]; then
    # What the example prints: the reference for every runner (a bare failure is listed below).
    # shellcheck disable=SC2046
    "${clean_env[@]}" $(bare_cmd pandas) >"$work/expected.pandas" 2>/dev/null </dev/null || true
  else
    expected_out "$lang" >"$work/expected.$lang"
  fi
  for runner in $(runners_of "$lang"); do
    reason="$(preflight "$runner" "$lang")"
    reason="${reason//$'\n'/ }"  # one line of results.tsv
    if [[ -n "$reason" ]]; then
      printf '%s\t%s\tNA\t%s\n' "$lang" "$runner" "$reason" >>"$results"
      continue
    fi
    argv_of "$runner" "$lang" | tr '\n' '\0' >"$work/argv.$lang.$runner"
    ok_runners+=("$runner")
  done
  if measure_interleaved "$lang" "$work/times"; then
    while IFS=$'\t' read -r runner data note; do
      printf '%s\t%s\tOK\t%s\t%s\n' "$lang" "$runner" "$data" "$note" >>"$results"
    done <"$work/times"
  else
    for runner in "${ok_runners[@]}"; do
      printf '%s\t%s\tNA\t%s\n' "$lang" "$runner" "failed during the timed runs" >>"$results"
    done
  fi
done

report_rc=0
"$py" - "$results" "$json_out" "$warm" <<'EOF' || report_rc=$?
import json, statistics, sys

rows = [(line.rstrip("\n").split("\t") + [""])[:5] for line in open(sys.argv[1]) if line.strip()]
warm = sys.argv[3] == "true"
out = []
def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

bare = {}
for lang, runner, state, data, _ in rows:
    if runner == "bare" and state == "OK":
        bare[lang] = statistics.median(float(x) for x in data.split(","))

hdr = f"{'language':<8} {'runner':<12} {'median ms':>10} {'p90 ms':>9} {'x bare':>7} {'+ms':>8}"
print(hdr)
print("-" * len(hdr))
cells = {}  # (language, runner) -> markdown cell
for lang, runner, state, data, note in rows:
    rec = {"language": lang, "runner": runner}
    if state != "OK":
        print(f"{lang:<8} {runner:<12} {'-':>10} {'-':>9} {'-':>7} {'-':>8}  ({data})")
        rec["unavailable"] = data
        cells[lang, runner] = "–"
    else:
        t = [float(x) * 1000 for x in data.split(",")]
        med, p90 = statistics.median(t), pct(t, 0.9)
        b = bare.get(lang)
        ratio = f"{med / (b * 1000):.2f}" if b else "-"
        extra = f"{med - b * 1000:+.1f}" if b else "-"
        print(f"{lang:<8} {runner:<12} {med:>10.1f} {p90:>9.1f} {ratio:>7} {extra:>8}"
              + (f"  ({note})" if note else ""))
        rec.update(median_ms=med, p90_ms=p90, runs=len(t),
                   ratio_vs_bare=(med / (b * 1000)) if b else None,
                   overhead_ms=(med - b * 1000) if b else None)
        if runner == "airlock-warm":
            rec["served_cold"] = int(note.split("/")[0])
        cell = f"{med:.1f}"
        if runner != "bare" and b:
            cell += f" ({med / (b * 1000):.2f}×)"
        if runner == "airlock-warm" and rec["served_cold"]:
            cell += f" [{note}]"
        cells[lang, runner] = cell
    out.append(rec)

# The same medians as a markdown table (ms, and × bare), the form of bench/README.md's tables.
labels = {"python": "python `print(1)`", "node": "node `console.log(1)`", "shell": "shell `true`",
          "pandas": "pandas `summarize_spending.py`"}
langs = list(dict.fromkeys(r[0] for r in rows))
runners = list(dict.fromkeys(r[1] for r in rows))
print()
print("| language | " + " | ".join(runners) + " |")
print("| --- |" + " --- |" * len(runners))
for lang in langs:
    print(f"| {labels.get(lang, lang)} | "
          + " | ".join(cells.get((lang, r), "") for r in runners) + " |")

failed = []
if warm:
    # docs/performance.md's targets for B1 warm; a miss is a result, not an error.
    print()
    for lang, target in (("python", 0.5), ("pandas", 0.3)):
        rec = next((r for r in out if (r["language"], r["runner"]) == (lang, "airlock-warm")),
                   None)
        if rec and rec.get("ratio_vs_bare") is not None:
            verdict = "met" if rec["ratio_vs_bare"] <= target else "not met"
            print(f"target B1 warm {lang}: ≤ {target}× bare; measured "
                  f"{rec['ratio_vs_bare']:.2f}× ({verdict})")
    # A warm row that could not run is an error of the supervisor or of this script.
    failed = [r for r in out if r["runner"] == "airlock-warm" and "unavailable" in r
              and r["language"] != "shell"]
if sys.argv[2]:
    json.dump({"benchmark": "B1", "results": out}, open(sys.argv[2], "w"), indent=1)
for r in failed:
    print(f"b1: airlock-warm {r['language']}: {r['unavailable']}", file=sys.stderr)
sys.exit(1 if failed else 0)
EOF
# Pools that failed to fill, but for shell, which has no pre-started interpreter by design.
if $warm && grep 'pool of' "$work/serve.log" | grep -qv 'no prestart driver for shell'; then
  echo "b1: airlock serve reported trouble with its pools:" >&2
  grep 'pool of' "$work/serve.log" | grep -v 'no prestart driver for shell' | sort | uniq -c |
    head -n 5 >&2
fi
[[ $report_rc -eq 0 ]] || exit "$report_rc"
