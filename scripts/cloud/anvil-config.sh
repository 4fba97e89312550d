# Sourced by cloud.sh: the one place that says how the lab cloud's Anvil conductor is configured.
# shellcheck shell=bash
# Anvil sits behind Keystone as Ironic does (auth_strategy keystone, service user `ironic` with the service
# role in the `service` project, password from a file) and resolves Glance image UUIDs with that user's token.
# Needs KEYSTONE_PORT and GLANCE_PORT, and the catalog filled (the user exists) before the conductor starts.
write_anvil_config() {
  local file="$1" dir="$2" port="$3"
  cat >"$file" <<YAML
name: cloud-anvil
host: 127.0.0.1
port: $port
database_path: $dir/anvil/anvil.sqlite
data_dir: $dir/anvil
fake_delay_ms: 0
power_sync:
  interval_s: 0
auth:
  auth_strategy: keystone
keystone:
  auth_url: http://127.0.0.1:$KEYSTONE_PORT/v3
  username: ironic
  password_file: $dir/secrets/ironic
  project_name: service
glance:
  endpoint: http://127.0.0.1:$GLANCE_PORT
  service_project: service
YAML
  chmod 600 "$file"
}
