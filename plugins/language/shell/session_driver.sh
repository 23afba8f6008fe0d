# airlock bash session driver: one long-lived bash per code context, whose working directory,
# variables, functions and options persist between runs.
#
# Same wire protocol as the Python and Node drivers: requests arrive on stdin, one JSON object per
# line, {"id": "r1", "code": "...", "env": {"K": "V"}}; events go to the control pipe (fd 3 at
# start): "ready" once, then per request an "error" event when the code's last status is not 0
# (or it was interrupted) and exactly one "done". The code's output goes to fds 1 and 2 directly.
# Embedded into the shell language plugin and run as `bash --noprofile --norc -c`.
#
# The code runs in this shell (eval inside a function), with fd 0 on /dev/null and neither the
# command stream nor the control pipe open: bash keeps its saved copies close-on-exec, so no
# command the code runs inherits them, and `read` or `cat` see EOF instead of the next request.
# SIGINT (an interrupt or the supervisor's timeout) sets a flag that a DEBUG trap (extdebug)
# turns into returns from every function up to the driver, so even a loop of builtins ends.
# `exit` is a function that ends the run the same way, with its status; the context stays.

if [[ ! -e /proc/self/fd/3 ]] && ! { true >&3; } 2>/dev/null; then
  echo "airlock session driver: fd 3 (the control pipe) is not open" >&2
  exit 2
fi
exec {__airlock_control}>&3 3>&-
exec {__airlock_commands}<&0 0</dev/null

__airlock_running=
__airlock_abort=
__airlock_exit=
__airlock_count=0

shopt -s extdebug
trap '[[ -n $__airlock_running ]] && __airlock_abort=1' INT
# Set only while code runs: bash runs it before every simple command, the driver's own included.
__airlock_debug='[[ -n $__airlock_abort && -n $__airlock_running && -n ${FUNCNAME[0]} ]] && return 2; :'

exit() {
  # In a subshell, exit ends the subshell, as always.
  if ((BASH_SUBSHELL > 0)) || [[ -z $__airlock_running ]]; then builtin exit "$@"; fi
  local status=${1:-$?}
  __airlock_exit=$((status & 255))
  __airlock_abort=1
}
logout() { exit "$@"; }

# --- JSON ----------------------------------------------------------------------------------------
# Requests come from the supervisor's JSON encoder (strings escaped, other text raw UTF-8). Before
# parsing, \\ becomes \x01 and \" becomes \x02, so a string is a plain "..." run without quotes.

__airlock_unescape() {
  local -n __airlock_out=$1
  local s=$2 hex ch
  s=${s//$'\x02'/\"}
  s=${s//\\n/$'\n'}
  s=${s//\\t/$'\t'}
  s=${s//\\r/$'\r'}
  s=${s//\\b/$'\b'}
  s=${s//\\f/$'\f'}
  s=${s//\\\//\/}
  while [[ $s =~ \\u([0-9a-fA-F]{4}) ]]; do
    hex=${BASH_REMATCH[1]}
    printf -v ch "\\u$hex"
    [[ $ch == *u$hex ]] && ch="?" # no UTF-8 locale: the character cannot be made
    s=${s//\\u$hex/$ch}
  done
  __airlock_out=${s//$'\x01'/\\}
}

__airlock_quote() { # a JSON string literal of $2, into the variable named $1
  local -n __airlock_q=$1
  local s=$2
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/\\r}
  __airlock_q="\"$s\""
}

__airlock_emit() { printf '%s\n' "$1" >&"$__airlock_control"; }

# Parses one request line into __airlock_id, __airlock_code and __airlock_env (an associative
# array); on a malformed one, returns 1 with the reason in __airlock_why.
__airlock_parse() {
  local s=$1 key value used ws='[[:space:]]*'
  __airlock_id= __airlock_code= __airlock_why= __airlock_has_code=
  __airlock_env=()
  s=${s//\\\\/$'\x01'}
  s=${s//\\\"/$'\x02'}
  [[ $s =~ ^$ws\{$ws ]] || { __airlock_why="request is not a JSON object"; return 1; }
  s=${s:${#BASH_REMATCH[0]}}
  while [[ $s =~ ^\"([^\"]*)\"$ws:$ws ]]; do
    key=${BASH_REMATCH[1]}
    s=${s:${#BASH_REMATCH[0]}}
    used=
    if [[ $s =~ ^\"([^\"]*)\" ]]; then
      value=${BASH_REMATCH[1]} used=${#BASH_REMATCH[0]}
      case $key in
        id) __airlock_unescape __airlock_id "$value" ;;
        code) __airlock_unescape __airlock_code "$value"; __airlock_has_code=1 ;;
        env) __airlock_why="'env' must be an object"; return 1 ;;
      esac
    elif [[ $s =~ ^\{$ws((\"[^\"]*\"$ws:$ws\"[^\"]*\"$ws,?$ws)*)\} ]]; then
      value=${BASH_REMATCH[1]} used=${#BASH_REMATCH[0]}
      if [[ $key == env ]]; then
        local k v raw_v
        while [[ $value =~ ^\"([^\"]*)\"$ws:$ws\"([^\"]*)\"$ws,?$ws ]]; do
          value=${value:${#BASH_REMATCH[0]}}
          raw_v=${BASH_REMATCH[2]}  # before the next =~ (in unescape) replaces BASH_REMATCH
          __airlock_unescape k "${BASH_REMATCH[1]}"
          __airlock_unescape v "$raw_v"
          if [[ ! $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
            __airlock_why="'env': '$k' is not a variable name"
            return 1
          fi
          __airlock_env[$k]=$v
        done
      fi
    elif [[ $s =~ ^(-?[0-9][0-9.eE+-]*|true|false|null|\{$ws\}|\[[^]\"]*\]) ]]; then
      used=${#BASH_REMATCH[0]}
      [[ $key == id ]] && { __airlock_why="request has no string 'id'"; return 1; }
      [[ $key == code ]] && __airlock_has_code=0
      [[ $key == env && ${BASH_REMATCH[1]} != null && ${BASH_REMATCH[1]:0:1} != "{" ]] &&
        { __airlock_why="'env' must be an object"; return 1; }
    else
      __airlock_why="request is not valid JSON at the value of '$key'"
      return 1
    fi
    s=${s:used}
    [[ $s =~ ^$ws,$ws ]] || break
    s=${s:${#BASH_REMATCH[0]}}
  done
  if [[ ! $s =~ ^$ws\}$ws$ ]]; then
    __airlock_why="request is not a JSON object (extra or malformed data)"
    return 1
  fi
  [[ -n $__airlock_id ]] || { __airlock_why="request has no string 'id'"; return 1; }
  [[ $__airlock_has_code == 1 ]] || { __airlock_why="request has no string 'code'"; return 1; }
  return 0
}

__airlock_bad_request() { # id (may be empty), message
  local id=null msg
  [[ -n $1 ]] && __airlock_quote id "$1"
  __airlock_quote msg "$2"
  __airlock_emit "{\"type\":\"error\",\"id\":$id,\"name\":\"RequestError\",\"value\":$msg,\"traceback\":[$msg]}"
  __airlock_emit "{\"type\":\"done\",\"id\":$id,\"status\":\"error\",\"duration_ms\":0}"
}

__airlock_usec() { local t=${EPOCHREALTIME/[.,]/}; printf -v "$1" '%s' "$t"; }

# --- runs ----------------------------------------------------------------------------------------

__airlock_run() {
  eval "$1"
}

__airlock_emit "{\"type\":\"ready\",\"language\":\"shell\",\"version\":\"${BASH_VERSION%%(*}\"}"

declare -A __airlock_env __airlock_saved
while IFS= read -r -u "$__airlock_commands" __airlock_line || [[ -n $__airlock_line ]]; do
  [[ -z ${__airlock_line//[[:space:]]/} ]] && continue
  __airlock_id=
  if ! __airlock_parse "$__airlock_line"; then
    __airlock_bad_request "$__airlock_id" "$__airlock_why"
    continue
  fi
  __airlock_usec __airlock_started
  __airlock_count=$((__airlock_count + 1))
  # The run's environment variables; what they replaced comes back after the run.
  __airlock_saved=()
  for __airlock_k in "${!__airlock_env[@]}"; do
    if [[ -v $__airlock_k ]]; then __airlock_saved[$__airlock_k]=1${!__airlock_k}; else __airlock_saved[$__airlock_k]=0; fi
    export "$__airlock_k=${__airlock_env[$__airlock_k]}"
  done
  __airlock_abort= __airlock_exit=
  __airlock_running=1
  trap "$__airlock_debug" DEBUG
  __airlock_run "$__airlock_code" </dev/null {__airlock_control}>&- {__airlock_commands}<&-
  __airlock_status=$?
  trap - DEBUG
  __airlock_running=
  for __airlock_k in "${!__airlock_saved[@]}"; do
    __airlock_v=${__airlock_saved[$__airlock_k]}
    if [[ ${__airlock_v:0:1} == 1 ]]; then export "$__airlock_k=${__airlock_v:1}"; else unset "$__airlock_k"; fi
  done
  __airlock_quote __airlock_qid "$__airlock_id"
  __airlock_state=ok
  if [[ -n $__airlock_exit ]]; then
    __airlock_status=$__airlock_exit
  elif [[ -n $__airlock_abort ]]; then
    __airlock_state=interrupted
    __airlock_emit "{\"type\":\"error\",\"id\":$__airlock_qid,\"name\":\"KeyboardInterrupt\",\"value\":\"interrupted\",\"traceback\":[\"KeyboardInterrupt: interrupted\"]}"
  fi
  if [[ $__airlock_state == ok && $__airlock_status != 0 ]]; then
    __airlock_state=error
    __airlock_emit "{\"type\":\"error\",\"id\":$__airlock_qid,\"name\":\"CommandExitError\",\"value\":\"exit status $__airlock_status\",\"traceback\":[\"CommandExitError: exit status $__airlock_status\"]}"
  fi
  __airlock_abort=
  __airlock_usec __airlock_ended
  __airlock_us=$((__airlock_ended - __airlock_started))
  printf -v __airlock_ms '%d.%03d' $((__airlock_us / 1000)) $((__airlock_us % 1000))
  __airlock_emit "{\"type\":\"done\",\"id\":$__airlock_qid,\"status\":\"$__airlock_state\",\"duration_ms\":$__airlock_ms,\"execution_count\":$__airlock_count,\"exit_code\":$__airlock_status}"
done
builtin exit 0
