#!/usr/bin/env bash
# Fails when gen/ is not exactly what `buf generate` makes from proto/ (stale or hand-edited generated code).
set -euo pipefail
cd "$(dirname "$0")/.."
node_modules/.bin/buf generate
if [ -n "$(git status --porcelain -- gen)" ]; then
  echo "gen/ is stale: run 'npm run generate' and commit the result" >&2
  git status --short -- gen >&2
  exit 1
fi
echo "gen/ matches proto/"
