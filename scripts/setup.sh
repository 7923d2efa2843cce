#!/usr/bin/env bash
# The set-up that `npm run demo` and `npm test` run first (their npm pre-scripts), so that
# the README's two commands work as written on a fresh Debian machine. Quick once done.
#
#   setup.sh demo|test|release|release-test
#
#   1. Debian packages: each tool the run uses, and the package that brings it. Missing
#      ones are installed with apt-get when running as root; otherwise one line says what is
#      missing and what the run does without it (the fallbacks: the kubelet emulator for the
#      demo, a hollow node and skipped tests for the suite), and set-up goes on.
#      OWNERREFS_SETUP_FORCE=1 asks apt-get for every package even when all are present, so
#      CI proves the install step on each run, not only on a new machine.
#   2. Go >= 1.26, which Debian does not carry: missing or older, one line and exit 1.
#   3. The cached builds, each a cache hit in milliseconds once made: the control plane and
#      the node's kubelet (both), the node's images (when their tools are there), csi-sanity,
#      helm, promtool, krew and actionlint (test). Nothing the test command does not run: the
#      oldest supported release is built by .ci/run's step that uses it.
#   4. OpenTelemetry's SDK for the coexistence test, in test/support/otel (test).
#   release (npm run release): podman and debootstrap, and helm; scripts/release.sh builds its
#   own tools (cosign, syft, crane). release-test (npm run test:release): those, and
#   qemu-user-static, to run the arm64 image's node.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what=${1:-}
[[ $what == demo || $what == test || $what == release || $what == release-test ]] || { echo "usage: setup.sh demo|test|release|release-test" >&2; exit 2; }
qemu=$([[ $what == release-test ]] && echo 1 || true)
[[ $what == release-test ]] && what=release
say() { echo "[setup] $*" >&2; }

# tool (a command, or a path) -> package. The real node: containerd (with ctr), runc, the CNI
# plugins, iproute2 (its bridge is removed with ip), busybox-static and gcc with libc6-dev
# (its two images are made here). The control plane's certificates: openssl.
declare -A pkg=(
  [openssl]=openssl [containerd]=containerd [ctr]=containerd [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins [ip]=iproute2
  [busybox]=busybox-static [gcc]=gcc [/usr/share/doc/libc6-dev]=libc6-dev
)
order=(openssl containerd ctr runc /usr/lib/cni/bridge ip busybox gcc /usr/share/doc/libc6-dev)
if [[ $what == release ]]; then
  pkg[podman]=podman pkg[debootstrap]=debootstrap
  order=(runc podman debootstrap)
  if [[ -n $qemu ]]; then pkg[/usr/lib/binfmt.d/qemu-aarch64.conf]=qemu-user-static; order+=(/usr/lib/binfmt.d/qemu-aarch64.conf); fi
fi
if [[ $what == test ]]; then
  # The image's test builds the Dockerfile with podman, from a base debootstrap makes.
  pkg[podman]=podman pkg[debootstrap]=debootstrap
  order+=(podman debootstrap)
fi
has() { if [[ $1 == /* ]]; then [[ -e $1 ]]; else command -v "$1" >/dev/null; fi; }

need=()
for tool in "${order[@]}"; do
  has "$tool" && [[ -z ${OWNERREFS_SETUP_FORCE:-} ]] && continue
  p=${pkg[$tool]}
  [[ " ${need[*]} " == *" $p "* ]] || need+=("$p")
done
if (( ${#need[@]} > 0 )); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "installing Debian packages: ${need[*]}"
    start=$SECONDS
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
    say "installed in $((SECONDS - start)) s"
  else
    why=$([[ $(id -u) == 0 ]] && echo "there is no apt-get" || echo "not root")
    [[ $what == release ]] && { say "cannot install ${need[*]} ($why): npm run release needs them; install them as root"; exit 1; }
    fallback=$([[ $what == demo ]] && echo "the demo runs on the kubelet emulator" || echo "the real-node tests run on a hollow node and those needing a container or podman are skipped")
    say "cannot install ${need[*]} ($why): $fallback; install them as root for a real node"
  fi
fi

go_version=$(go env GOVERSION 2>/dev/null || true)
if [[ ! $go_version =~ ^go1\.(2[6-9]|[3-9][0-9]) ]]; then
  say "Go 1.26 or later is needed to build the control plane and the kubelet (found: ${go_version:-none}); install it from https://go.dev/dl and put it on PATH"
  exit 1
fi

# Cache hits cost milliseconds; a cold build says how long it will take.
if [[ $what == release ]]; then bash localcluster/tools/build.sh >/dev/null; exit 0; fi
if [[ $what == test ]]; then
  # The test tools share no module with Kubernetes, so they build beside its builds: a gain
  # where there are more than two cores (on two, the compiles fill both and it is a wash).
  # Waited for below.
  { bash localcluster/tools/build.sh && # helm and promtool
    bash localcluster/release/tools/build.sh krew && # the release's install test
    bash localcluster/release/tools/build.sh actionlint # the release workflow's check
  } >/dev/null &
  tools=$!
fi
bash localcluster/controlplane/build.sh >/dev/null
bash localcluster/node/build.sh >/dev/null
if has busybox && has gcc; then bash localcluster/node/images/build.sh >/dev/null; fi
if [[ $what == test ]]; then
  bash localcluster/csi/build.sh >/dev/null
  if has busybox; then bash localcluster/conformance/build.sh >/dev/null; fi # Kubernetes' e2e suite with ours, agnhost and the images they run
  wait "$tools" || { say "building the test tools failed (their log is above)"; exit 1; }
fi
if [[ $what == test ]]; then
  # OpenTelemetry's JavaScript SDK for the coexistence test, apart from the project's own
  # dependencies (its peers pin an @opentelemetry/api other than the one prom-client shares).
  npm ci --prefix test/support/otel --no-audit --no-fund --ignore-scripts --loglevel=error >&2
fi
