#!/usr/bin/env bash
# Checks the Kubernetes manifests of deploy/kubernetes offline, with no cluster and no network:
#   - renders the kustomization with `kubectl kustomize` (when kubectl is installed; it needs no
#     cluster for that), with and without the microVM component, else takes the listed files as
#     they are;
#   - validates every object against the Kubernetes API schemas and its kind's field names,
#     and the objects against each other (deploy/kubernetes/validate/validate.cjs says how);
#   - validates the policy in the airlock-policy ConfigMap with `airlock policy check`, and runs
#     the proxy's initContainer as the Deployment says (`airlock fleet haproxy` with its
#     arguments, on the node list of the ConfigMap, with throwaway certificates) and checks the
#     configuration it writes with `haproxy -c`, when a built airlock is at hand (AIRLOCK_BIN,
#     else build/bin/airlock) and, for the latter, haproxy and openssl;
#   - runs the negative controls, deploy/kubernetes/validate/fixtures/broken-*.yaml: each is
#     broken on purpose and must be refused for the reasons it states, so this check cannot pass
#     by checking nothing.
# Needs node and the validator's packages: `npm ci --prefix deploy/kubernetes/validate`
# (scripts/install-deps.sh). Takes 2-3 s.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
dir=deploy/kubernetes
validate=$dir/validate

if [ ! -d "$validate/node_modules/kubernetes-models" ]; then
  echo "check-k8s-manifests: $validate/node_modules is missing: run scripts/install-deps.sh" \
    "(or npm ci --prefix $validate)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

args=(--kustomization "$dir" --kustomization "$dir/microvm")
if command -v kubectl >/dev/null && kubectl kustomize --help >/dev/null 2>&1; then
  kubectl kustomize "$dir" >"$tmp/fleet.yaml"
  # With the microVM component: from an overlay outside deploy/kubernetes, since kustomize
  # refuses a base that contains the overlay using it.
  mkdir "$tmp/microvm"
  base="$(realpath --relative-to="$tmp/microvm" "$dir")"
  cat >"$tmp/microvm/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
components:
  - $base/microvm
EOF
  kubectl kustomize "$tmp/microvm" >"$tmp/fleet-microvm.yaml"
  args+=(--bundle "$tmp/fleet.yaml" --as "kubectl kustomize $dir"
    --bundle "$tmp/fleet-microvm.yaml" --as "kubectl kustomize $dir + components: microvm")
else
  echo "check-k8s-manifests: no kubectl here to render the kustomization: checking the files" \
    "it lists as they are (the microVM component's patch is not applied)" >&2
  args+=(--bundle-of "$dir")
fi

airlock="${AIRLOCK_BIN:-build/bin/airlock}"
mkdir "$tmp/extract"
args+=(--extract-to "$tmp/extract")
for fixture in "$validate"/fixtures/broken-*.yaml; do
  args+=(--broken "$fixture")
done

node "$validate/validate.cjs" "${args[@]}"

for f in policy.toml nodes.txt generate-config.args; do
  [ -s "$tmp/extract/$f" ] ||
    { echo "FAIL $dir: the rendered bundle has no $f (validate.cjs --extract-to)" >&2; exit 1; }
done

if [ ! -x "$airlock" ]; then
  echo "check-k8s-manifests: no $airlock: the policy and the proxy's generated configuration" \
    "were not checked" >&2
else
  "$airlock" policy check "$tmp/extract/policy.toml" >"$tmp/out" 2>&1 || {
    echo "FAIL $dir/policy-configmap.yaml: airlock policy check (lines of policy.toml):" >&2
    cat "$tmp/out" >&2
    exit 1
  }
  echo "ok   $dir/policy-configmap.yaml: airlock policy check"

  if ! command -v haproxy >/dev/null || ! command -v openssl >/dev/null; then
    echo "check-k8s-manifests: no haproxy or openssl: the proxy's generated configuration was" \
      "not checked" >&2
  else
    # The initContainer's arguments, with the pod's absolute paths moved under a scratch root.
    root="$tmp/root"
    mapfile -d '' -t init <"$tmp/extract/generate-config.args"
    rooted=()
    for a in "${init[@]}"; do
      a="${a// \// $root/}"                        # ":8443 ssl crt /etc/..." inside an argument
      [[ "$a" == /* ]] && a="$root$a"
      rooted+=("$a")
    done
    value() {  # value OPTION: the argument after OPTION
      local i
      for ((i = 0; i + 1 < ${#rooted[@]}; i++)); do
        [ "${rooted[i]}" = "$1" ] && { printf '%s\n' "${rooted[i + 1]}"; return; }
      done
    }
    for opt in --nodes --ca --client-cert --out --map; do
      [ -n "$(value "$opt")" ] && mkdir -p "$(dirname "$(value "$opt")")"
    done
    cp "$tmp/extract/nodes.txt" "$(value --nodes)"
    # Throwaway certificates, only for HAProxy to load: the CA, the client and serving PEMs.
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
      -subj /CN=check-k8s-manifests -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
    cp "$tmp/cert.pem" "$(value --ca)"
    cat "$tmp/cert.pem" "$tmp/key.pem" >"$(value --client-cert)"
    for crt in $(value --listen | grep -o 'crt [^ ]*' | cut -d' ' -f2); do
      mkdir -p "$(dirname "$crt")" && cat "$tmp/cert.pem" "$tmp/key.pem" >"$crt"
    done
    if ! { "$airlock" "${rooted[@]}" && haproxy -c -f "$(value --out)"; } >"$tmp/out" 2>&1; then
      echo "FAIL $dir/proxy-deployment.yaml: the generate-config initContainer (airlock" \
        "${init[*]}), then haproxy -c:" >&2
      cat "$tmp/out" >&2
      exit 1
    fi
    echo "ok   $dir/proxy-deployment.yaml: generate-config's haproxy.cfg passes haproxy -c" \
      "($(haproxy -v | head -n 1 | cut -d' ' -f1-3))"
  fi
fi
echo "check-k8s-manifests: passed in $((SECONDS - started)) s"
