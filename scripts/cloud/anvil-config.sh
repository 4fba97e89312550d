# Sourced by cloud.sh: the one place that says how the lab cloud's Anvil conductor is configured.
# shellcheck shell=bash
# NOTE: noauth until Anvil's keystone strategy lands; Nova still authenticates to Keystone and finds Anvil
# through the catalog's `baremetal` endpoint, so switching is this file only: `auth_strategy: keystone` plus
# the `keystone` section (service user `ironic`, password from $DIR/secrets/ironic), and Glance image sources.
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
  auth_strategy: noauth
YAML
  chmod 600 "$file"
}
