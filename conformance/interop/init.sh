#!/bin/sh
# /init of the interop guest (busybox sh). PID 1 mounts the usual file
# systems, loads the kernel modules in the order the host worked out, starts
# the job loop and then only reaps orphans. The kernel console is ttyS0.
#
# The job loop serves the host on the second serial port (ttyS1). The host
# writes one line at a time, "J ID LEN COMMAND" (LEN: COMMAND's length); the
# loop evals COMMAND in its own shell and answers with COMMAND's output and
# a line "\nGOROCE-END ID STATUS". A line that is not whole (wrong prefix or
# length) is answered "GOROCE-BAD" and not run: the host sends it again.
#
# Programs that must run while the loop serves further commands are started
# with bgstart, detached (double fork): their exits signal PID 1, never the
# loop. (Busybox's read builtin restarts on SIGCHLD and drops what it had
# read of the line so far.)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
export HOME=/root
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

echo "goroce-interop guest: $(uname -r)"
while read -r m; do
	[ -n "$m" ] || continue
	insmod "/lib/modules/$m.ko" || echo "goroce-interop guest: insmod $m failed"
done </etc/modules.order

# Busybox's sh runs its own applets before anything in PATH: iproute2's
# ip and tc (netem) must be called by their paths.
ip() { /bin/ip "$@"; }
tc() { /sbin/tc "$@"; }

# No IPv6: keeps the captures quiet and GID index 1 the IPv4-mapped GID.
for f in /proc/sys/net/ipv6/conf/*/disable_ipv6; do echo 1 >"$f"; done 2>/dev/null
ip link set lo up

# waitlisten PORT [TENTHS]: wait until something listens on TCP PORT.
waitlisten() {
	hex=$(printf ':%04X 00000000' "$1")
	hex6=$(printf ':%04X 00000000000000000000000000000000' "$1")
	n=0
	while [ "$n" -lt "${2:-100}" ]; do
		if grep -q "$hex:0000 0A" /proc/net/tcp 2>/dev/null ||
			grep -q "$hex6:0000 0A" /proc/net/tcp6 2>/dev/null; then
			return 0
		fi
		usleep 100000
		n=$((n + 1))
	done
	echo "nothing listens on TCP port $1"
	return 1
}

# bgstart NAME PROG ARGS...: run PROG detached, its output in /tmp/NAME.out,
# its exit status (once it exits) in /tmp/NAME.rc; print its PID.
bgstart() {
	n=$1
	shift
	rm -f "/tmp/$n.out" "/tmp/$n.rc" "/tmp/$n.pid" "/tmp/$n.rc.tmp"
	( ("$@" </dev/null >"/tmp/$n.out" 2>&1 &
		echo $! >"/tmp/$n.pid"
		wait $!
		echo $? >"/tmp/$n.rc.tmp"
		mv "/tmp/$n.rc.tmp" "/tmp/$n.rc") &)
	i=0
	while [ ! -s "/tmp/$n.pid" ] && [ $i -lt 100 ]; do
		usleep 10000
		i=$((i + 1))
	done
	echo "PID $(cat "/tmp/$n.pid")"
}

# bgdone NAME: whether the job has exited.
bgdone() { [ -e "/tmp/$1.rc" ]; }

# bgreap NAME [TENTHS]: give job NAME up to TENTHS tenths of a second to
# exit, then kill it; print its output and "GOROCE-EXIT STATUS".
bgreap() {
	i=0
	while ! bgdone "$1" && [ $i -lt "${2:-50}" ]; do
		usleep 100000
		i=$((i + 1))
	done
	bgdone "$1" || kill "$(cat "/tmp/$1.pid")" 2>/dev/null
	i=0
	while ! bgdone "$1" && [ $i -lt 50 ]; do
		usleep 100000
		i=$((i + 1))
	done
	bgdone "$1" || kill -9 "$(cat "/tmp/$1.pid")" 2>/dev/null
	i=0
	while ! bgdone "$1" && [ $i -lt 20 ]; do
		usleep 100000
		i=$((i + 1))
	done
	cat "/tmp/$1.out"
	echo "GOROCE-EXIT $(cat "/tmp/$1.rc" 2>/dev/null || echo -1)"
}

jobloop() {
	stty -F /dev/ttyS1 raw -echo -echoe -echok -echoctl -echoke 2>/dev/null
	exec 3<>/dev/ttyS1
	echo "GOROCE-READY $(uname -r)" >&3
	while IFS= read -r line <&3; do
		case $line in
		"J "*) ;;
		*)
			echo "GOROCE-BAD" >&3
			continue
			;;
		esac
		rest=${line#J }
		id=${rest%% *}
		rest=${rest#* }
		len=${rest%% *}
		cmd=${rest#* }
		if [ "$len" != "${#cmd}" ]; then
			echo "GOROCE-BAD" >&3
			continue
		fi
		eval "$cmd" </dev/null >&3 2>&1
		printf '\nGOROCE-END %s %d\n' "$id" "$?" >&3
	done
	echo "goroce-interop guest: job channel closed"
}

jobloop &
loop=$!
while [ -e "/proc/$loop" ]; do
	wait
done
poweroff -f
