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

# write_anvil_lab_config FILE IMAGE_ROOT: what `lab up` gives its own conductor, for the lab's QEMU nodes:
# they reach the conductor at the guest address scripts/lab/vm-args.ts forwards (10.0.2.100, port 80 →
# this conductor's port), PXE-boot the ramdisk from IMAGE_ROOT/ramdisk, and fetch Glance images from the
# image cache by signed links under that address. No power sync: the test image powers itself off after
# printing its marker, and a sync forcing the recorded state would switch it on again and again.
write_anvil_lab_config() {
  local file="$1" root="$2"
  cat >>"$file" <<YAML
public_url: http://10.0.2.100
boot:
  deploy_kernel: http://10.0.2.100/images/ramdisk/anvil.kernel
  deploy_ramdisk: http://10.0.2.100/images/ramdisk/anvil.initramfs
images:
  local_root: $root
  public_dir: ramdisk
YAML
}
