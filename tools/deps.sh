#!/usr/bin/env bash
# deps.sh: install the Debian packages in tools/packages.txt that are missing (sudo when not root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done < "$here/packages.txt"
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "make deps: installing missing Debian packages: ${missing[*]}"
if ! command -v apt-get >/dev/null; then
  echo "make deps: apt-get not found; install these packages with your system's package manager: ${missing[*]}" >&2
  exit 2
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "make deps: not root and no sudo; ask an administrator to install: ${missing[*]}" >&2; exit 2; fi
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine; a failed update is not fatal by itself.
$sudo apt-get update -qq || echo "make deps: apt-get update failed; trying the install anyway" >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "make deps: done"
