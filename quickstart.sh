#!/usr/bin/env bash
# Sets everything up and profiles a demo app:
#   1. system packages (a C toolchain, libelf-dev, liblzma-dev, libunwind-dev): installed when run as
#      root, otherwise the exact apt-get line is printed and the script stops;
#   2. npm dependencies and the native build (node-gyp);
#   3. examples/demo.js profiled into demo.svg (and demo.folded).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null; then
  echo "quickstart: Node.js >= 20 is needed (node is not on PATH)" >&2; exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "quickstart: Node.js >= 20 is needed, this is $(node --version)" >&2; exit 1
fi

packages=(make gcc g++ python3 libelf-dev liblzma-dev libunwind-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "quickstart: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
  else
    echo "quickstart: missing system packages. Run this, then run ./quickstart.sh again:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# Build against the headers of the node that runs us when it ships them
# (Debian's /usr/include/node, official tarballs' include/node): no download.
nodedir=$(node -p 'require("path").resolve(process.execPath, "..", "..")')
if [ -z "${npm_config_nodedir:-}" ] && [ -f "$nodedir/include/node/node_api.h" ]; then
  export npm_config_nodedir="$nodedir"
fi

npm ci --no-audit --no-fund
node examples/demo.js demo.svg
