# Sourced (not run) by the fetch scripts that take packages from Debian outside the host's apt: the kernel and
# tools for another architecture (images/ramdisk/fetch-arch.sh) and the drivers' firmware
# (images/firmware/fetch.sh). apt-get then runs with a private sources list, lists and package cache under a
# work dir, so the host's apt configuration is neither read for nor changed by them.
#
#   private_apt WORK COMPONENT [SOURCE_OPTION...] [-- APT_OPTION...]
#
# Writes WORK/sources.list: the host's suite (bookworm), its -updates and -security, COMPONENT only, signed by
# Debian's archive key, each source with SOURCE_OPTIONs too (e.g. arch=arm64); makes apt's private dirs; sets
# the array apt_options (pass it to every apt-get and apt-cache call), APT_OPTIONs (-o k=v ...) appended.

private_apt() {
  local work=$1 component=$2 suite keyring=/usr/share/keyrings/debian-archive-keyring.gpg options=""
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do options="$options$1 "; shift; done
  [ $# -gt 0 ] && shift
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
  {
    echo "deb [${options}signed-by=$keyring] http://deb.debian.org/debian $suite $component"
    echo "deb [${options}signed-by=$keyring] http://deb.debian.org/debian $suite-updates $component"
    echo "deb [${options}signed-by=$keyring] http://deb.debian.org/debian-security $suite-security $component"
  } >"$work/sources.list"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/none"
  apt_options=(
    -q -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1
    # no _apt sandbox: the private dirs belong to whoever runs this
    -o APT::Sandbox::User="$(id -un)"
    "$@"
  )
}
