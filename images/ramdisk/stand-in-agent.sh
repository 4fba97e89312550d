#!/bin/sh
# Stand-in for the agent executable while the real one is not built: same command line
# (anvil-agent service --conductor URL [--log-level L]), then one HTTP GET of
# the conductor URL (so a test sees the ramdisk reach the host), then a non-zero exit (so init's restart loop
# shows too). NOTE: Debian's static busybox wget segfaults, hence a hand-written request through nc.
if [ "$1" != service ] || [ "$2" != --conductor ] || [ -z "$3" ]; then
  echo "anvil-agent (stand-in): usage: anvil-agent service --conductor URL" >&2
  exit 2
fi
rest=${3#*://}
hostport=${rest%%/*}
path=/${rest#*/}
if [ "$path" = "/$rest" ]; then path=/; fi
host=${hostport%:*}
port=${hostport##*:}
if [ "$port" = "$hostport" ]; then port=80; fi
echo "anvil-agent (stand-in): dialing $3 (bootif ${ANVIL_BOOTIF:-unknown})"
if printf 'GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: anvil-agent-stand-in\r\n\r\n' "$path" "$hostport" |
  nc -w 5 "$host" "$port" | head -n 1 | grep -q '^HTTP/'; then
  echo "anvil-agent (stand-in): conductor answered"
else
  echo "anvil-agent (stand-in): conductor unreachable"
fi
exit 1
