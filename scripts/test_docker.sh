#!/usr/bin/env bash
# Build and test both container images from this checkout, with no image
# registry: docker/Dockerfile (vLLM + weightstream) and docker/Dockerfile.cpu
# (CLI + Python package), each to its `test` stage (which runs
# `weightstream load --verify` on a generated sample and checks the Python
# package and the plugin) and then to its runtime image.
#
# The official base images (vllm/vllm-openai, debian, python) are replaced by
# one local Debian 12 image made here with debootstrap (Debian's mirror is
# reachable where Docker Hub is not) and passed as --build-arg BASE/BUILDER;
# docs/docker.md says what that does and does not test. `podman build
# --isolation=chroot` because these machines cannot run containers (crun
# cannot set rlimits), only build them. Needs root (apt-get, debootstrap).
#
# Layers are cached under stable tags, so a rerun with unchanged sources takes
# seconds; the cargo registry and target directory are build cache mounts, so
# a source change recompiles only the workspace crates.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
t0=$SECONDS
say() { printf '== [%4ss] %s\n' "$((SECONDS - t0))" "$*"; }

# -- tools: installed if missing, never skipped.
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "test_docker: ${missing[*]} missing and not root: install them (apt-get install ${missing[*]})" >&2; exit 1; }
  say "installing ${missing[*]} (apt-get)"
  # One apt-get at a time: scripts/test.sh may run the other installer beside this one.
  flock /var/lock/weightstream-apt.lock apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive flock /var/lock/weightstream-apt.lock apt-get install -y -q "${missing[@]}" >/dev/null
fi
[ "$(id -u)" = 0 ] || { echo "test_docker: debootstrap and podman import need root" >&2; exit 1; }

# `scripts/test_docker.sh base`: the tools and the base image only (mostly
# downloads: scripts/test.sh starts it beside the build).
[ "${1:-}" = base ] && base_only=1 || base_only=0

# -- the two Dockerfiles share their builder stage through the layer cache,
# which needs the stage to be the same text in both.
builder_of() { sed -n '/^# ---- builder:/,/^# ---- end of builder/p' "$1"; }
if ! diff <(builder_of docker/Dockerfile) <(builder_of docker/Dockerfile.cpu) >/dev/null; then
  echo "test_docker: the builder stages of docker/Dockerfile and docker/Dockerfile.cpu differ:" >&2
  diff <(builder_of docker/Dockerfile) <(builder_of docker/Dockerfile.cpu) >&2 || true
  exit 1
fi
[ -n "$(builder_of docker/Dockerfile)" ] || { echo "test_docker: no builder stage markers in docker/Dockerfile" >&2; exit 1; }

# -- the base image: Debian 12 minbase with python3 and pip, plus numpy,
# PyYAML, tqdm and requests, which vLLM's image has and the plugin's gguf
# needs; apt sources as in debian:bookworm-slim (the security suite carries
# the Rust the builder installs). Tagged by this recipe's hash: made once.
MIRROR=${WEIGHTSTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PKGS=python3,python3-pip,python3-numpy,python3-yaml,python3-tqdm,python3-requests,ca-certificates
SOURCES="deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main"
# RUN steps reach PyPI, crates.io and Debian through this host's network.
# Where that goes through a proxy with its own CA (as on these machines: the
# host trusts it through /usr/local/share/ca-certificates), the base image
# trusts the same CAs, so the builds' pip and cargo do. Only this local test
# base carries them; the Dockerfiles know nothing of it.
host_cas=()
for c in /usr/local/share/ca-certificates/*.crt; do [ -f "$c" ] && host_cas+=("$c"); done
recipe=$( { printf '%s\n%s\n%s\n' "v2" "$PKGS" "$SOURCES"; cat ${host_cas[@]+"${host_cas[@]}"}; } | sha256sum | cut -c1-12)
BASE_IMAGE=localhost/weightstream-test-base:bookworm-$recipe
if podman image exists "$BASE_IMAGE"; then
  say "base image $BASE_IMAGE (cached)"
else
  say "base image $BASE_IMAGE: debootstrap --variant=minbase bookworm"
  rootfs=$(mktemp -d /var/tmp/weightstream-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include="$PKGS" bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
    || { tail -30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  printf '%s\n' "$SOURCES" >"$rootfs/etc/apt/sources.list"
  if [ ${#host_cas[@]} -gt 0 ]; then
    cp "${host_cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 \
      || { echo "test_docker: update-ca-certificates failed in the base image" >&2; exit 1; }
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

if [ "$base_only" = 1 ]; then
  say "test_docker: base image ready"
  exit 0
fi

build_opts=(--isolation=chroot --layers
  --build-arg "BASE=$BASE_IMAGE" --build-arg "BUILDER=$BASE_IMAGE")
# A cached test stage passed before on the same inputs; to run every step
# again anyway (the cargo cache mounts still apply): WEIGHTSTREAM_DOCKER_NO_CACHE=1.
if [ "${WEIGHTSTREAM_DOCKER_NO_CACHE:-0}" = 1 ]; then
  build_opts+=(--no-cache)
fi

build() { # build DOCKERFILE TARGET TAG
  local log
  log=$LOGS/$(basename "$1")-${2:-runtime}.log
  say "podman build -f $1 ${2:+--target $2 }-t $3"
  if ! podman build "${build_opts[@]}" -f "$1" ${2:+--target "$2"} -t "$3" . >"$log" 2>&1; then
    tail -60 "$log" >&2
    echo "test_docker: podman build -f $1 ${2:+--target $2} failed (log above; all of it in $log)" >&2
    exit 1
  fi
  # The test stages' own output: what they checked.
  grep -E '^(cuda_status|python load_file|plugin |image checks|weightstream [0-9]|[0-9]+ tensors|verif)' "$log" || true
}

# Full build logs (the test stages' output among them) land here.
LOGS=$ROOT/target/test-docker
mkdir -p "$LOGS"
build docker/Dockerfile test localhost/weightstream-vllm:test
build docker/Dockerfile "" localhost/weightstream-vllm:ci
build docker/Dockerfile.cpu test localhost/weightstream-cpu:test
build docker/Dockerfile.cpu "" localhost/weightstream-cpu:ci

say "images (podman image ls)"
podman image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' \
  | grep -E '^localhost/weightstream-(vllm|cpu|test-base):' || true
say "test_docker: 2 images built and tested"
