#!/usr/bin/env bash
# Writes a throwaway Glance (Debian's glance-api) into DIR: loopback on PORT, no Keystone (the "context"
# middleware trusts X-Identity-Status/X-Project-Id/X-Roles headers, as behind keystonemiddleware), the file
# store and SQLite under DIR, then creates its database. Start it with:
#   glance-api --config-file DIR/glance-api.conf
# Usage: scripts/setup/glance.sh DIR PORT
set -euo pipefail
dir=${1:?usage: glance.sh DIR PORT}
port=${2:?usage: glance.sh DIR PORT}
mkdir -p "$dir/images" "$dir/staging" "$dir/tasks"
dir=$(cd "$dir" && pwd)
cat >"$dir/glance-api-paste.ini" <<PASTE
[pipeline:glance-api-anvil]
pipeline = versionnegotiation context rootapp

[composite:rootapp]
paste.composite_factory = glance.api:root_app_factory
/: apiversions
/v2: apiv2app

[app:apiversions]
paste.app_factory = glance.api.versions:create_resource

[app:apiv2app]
paste.app_factory = glance.api.v2.router:API.factory

[filter:versionnegotiation]
paste.filter_factory = glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory

[filter:context]
paste.filter_factory = glance.api.middleware.context:ContextMiddleware.factory
PASTE
cat >"$dir/glance-api.conf" <<CONF
[DEFAULT]
bind_host = 127.0.0.1
bind_port = $port
workers = 1
enabled_backends = fs:file
use_stderr = true
log_file =
image_cache_dir = $dir/cache

[glance_store]
default_backend = fs

[fs]
filesystem_store_datadir = $dir/images

[os_glance_staging_store]
filesystem_store_datadir = $dir/staging

[os_glance_tasks_store]
filesystem_store_datadir = $dir/tasks

[database]
connection = sqlite:///$dir/glance.sqlite

[paste_deploy]
config_file = $dir/glance-api-paste.ini
flavor = anvil

[oslo_policy]
enforce_scope = false
enforce_new_defaults = false

[oslo_concurrency]
lock_path = $dir/locks
CONF
glance-manage --config-file "$dir/glance-api.conf" db_sync >"$dir/db_sync.log" 2>&1 ||
  { cat "$dir/db_sync.log" >&2; exit 1; }
