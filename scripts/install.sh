#!/usr/bin/env bash
# Installs Anvil as a system service: the conductor (systemd unit, sandboxed, user `anvil`), the `anvil`
# CLI, the config file, and the agent/ramdisk artefacts the conductor serves to nodes.
#   sudo bash scripts/install.sh [--build] [--no-deps] [--no-start]
# DESTDIR=/tmp/stage installs into a staging root (packaging, tests) without touching the running system.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

build=0 deps=1 start=1
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;     # build the agent and the deploy ramdisk first (needs the Debian packages)
    --no-deps) deps=0 ;;    # do not install Debian/npm dependencies (staging, tests)
    --no-start) start=0 ;;  # install but do not enable/start the service
    *) echo "install: unknown option $arg" >&2; exit 2 ;;
  esac
done

dest=${DESTDIR:-}
prefix=/opt/anvil
conf=/etc/anvil
state=/var/lib/anvil
units=/etc/systemd/system
bindir=/usr/local/bin
say() { printf 'install: %s\n' "$*"; }

if [ "$deps" = 1 ]; then
  bash scripts/setup/system-deps.sh
fi
if [ "$build" = 1 ]; then
  npm run build:agent
  npm run build:ramdisk
fi

# 1. The service user owns only the state directory.
if [ -z "$dest" ] && ! getent passwd anvil >/dev/null; then
  useradd --system --home-dir "$state" --no-create-home --shell /usr/sbin/nologin anvil
  say "created system user anvil"
fi

# 2. The application: tracked files only (no local state, builds or secrets), then its npm packages.
install -d "$dest$prefix" "$dest$prefix/bin"
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 tar -cf - ) | tar -xf - -C "$dest$prefix"
if [ "$deps" = 1 ]; then
  (cd "$dest$prefix" && npm ci --no-audit --no-fund)
elif [ -d "$repo/node_modules" ] && [ ! -e "$dest$prefix/node_modules" ]; then
  ln -s "$repo/node_modules" "$dest$prefix/node_modules"
fi
# The conductor runs from an esbuild bundle of the installed sources, not through tsx: no TypeScript loader in
# the service's memory (docs/performance.md has the figures).
(cd "$dest$prefix" && node --import tsx scripts/build/conductor.ts)
cat > "$dest$prefix/bin/anvil-conductor" <<'WRAP'
#!/bin/sh
# The conductor, run from the installed tree's bundle; settings from ANVIL_CONFIG and flags.
set -e
prefix=$(dirname "$(dirname "$(readlink -f "$0")")")
exec node "$prefix/build/conductor/main.js" "$@"
WRAP
chmod 755 "$dest$prefix/bin/anvil-conductor" "$dest$prefix/bin/anvil"
install -d "$dest$bindir"
ln -sf "$prefix/bin/anvil" "$dest$bindir/anvil"
ln -sf "$prefix/bin/anvil-conductor" "$dest$bindir/anvil-conductor"

# 3. Configuration: never overwrite an operator's file.
install -d -m 0755 "$dest$conf"
if [ ! -e "$dest$conf/conductor.yaml" ]; then
  sed -e "s|^data_dir: .*|data_dir: $state # boot files, images, state|" \
      -e "s|^database_path: .*|database_path: $state/anvil.sqlite # SQLite file|" \
      -e "s|^public_url: |# public_url: |" \
      -e "s|^  deploy_kernel: |  # deploy_kernel: |" -e "s|^  deploy_ramdisk: |  # deploy_ramdisk: |" \
      -e "s|^  local_root: |  # local_root: |" \
      deploy/conductor.example.yaml > "$dest$conf/conductor.yaml"
  chmod 0640 "$dest$conf/conductor.yaml"
  say "wrote $conf/conductor.yaml (edit host, public_url and deploy images)"
fi
install -m 0644 deploy/conductor.example.yaml "$dest$conf/conductor.example.yaml"

# 4. What nodes boot: the deploy kernel and ramdisk (with the agent inside), served under /boot/.
install -d "$dest$state/http/boot"
for f in build/ramdisk/anvil.kernel build/ramdisk/anvil.initramfs build/anvil-agent; do
  if [ -f "$f" ]; then install -m 0644 "$f" "$dest$state/http/boot/"; say "installed $(basename "$f")"; fi
done
[ -f build/ramdisk/anvil.kernel ] || say "no deploy ramdisk built: run with --build (or npm run build:ramdisk) to serve one"

# 5. The unit.
install -d "$dest$units"
install -m 0644 deploy/systemd/anvil-conductor.service "$dest$units/anvil-conductor.service"
if [ -z "$dest" ]; then
  chown -R anvil:anvil "$state"
  chgrp anvil "$conf/conductor.yaml"
  if [ "$start" = 1 ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now anvil-conductor.service
    say "anvil-conductor is running: systemctl status anvil-conductor; journalctl -u anvil-conductor"
  fi
fi
say "done"
