#!/usr/bin/env bash
# Installs what the cluster and its tests need on a fresh Debian/Ubuntu machine, once:
# nats-server (Debian's package) and, for the tests, the nats-py client and the gRPC tools the
# gateway test generates its Python client with.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  echo "installing nats-server" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
fi

if [ "${1:-}" = "--tests" ] && ! python3 -c 'import nats' 2>/dev/null; then
  echo "installing nats-py" >&2
  python3 -m pip install -q 'nats-py==2.16.0'
fi

if [ "${1:-}" = "--tests" ] && ! python3 -c 'import grpc_tools, grpc_reflection' 2>/dev/null; then
  echo "installing grpcio-tools and grpcio-reflection" >&2
  python3 -m pip install -q 'grpcio-tools==1.85.1' 'grpcio-reflection==1.85.1'
fi
