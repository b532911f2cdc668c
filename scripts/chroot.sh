# Sourced by scripts/test.sh: other PostgreSQL majors from Debian's own
# packages, in a chroot of the Debian release that ships them.
#
#   rl_chroot_ready MAJOR      makes (once) and updates the chroot of MAJOR;
#                              prints its directory
#   rl_chroot_run MAJOR CMD... runs CMD as root inside it, the repository
#                              mounted at /repo
#
# Chroots are cached outside the repository ($RL_CHROOT_CACHE, default
# /var/cache/ratelimit-chroots) and reused between runs.  Every mount is
# made inside a private mount namespace (unshare -m): nothing stays mounted
# when the command ends, however it ends.

RL_CHROOT_CACHE=${RL_CHROOT_CACHE:-/var/cache/ratelimit-chroots}

# The Debian release that ships a major, and the debootstrap script for it
# (this debootstrap has no script for forky: sid's works).
rl_chroot_suite() {
	case $1 in
		17) echo "trixie trixie" ;;
		18) echo "forky sid" ;;
		*) rl_die "no Debian release with PostgreSQL $1 is known (17: trixie, 18: forky)" ;;
	esac
}

# The mirror this machine's apt uses.
rl_debian_mirror() {
	local uri
	uri=$(grep -h -m1 -E '^URIs:.*debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}')
	[ -n "$uri" ] || uri=$(grep -h -m1 -E '^deb .*debian/? ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}')
	echo "${uri:-http://deb.debian.org/debian}"
}

# rl_chroot_exec ROOT CMD...: CMD in ROOT with /proc, /dev and the
# repository mounted, in a mount namespace of its own.
rl_chroot_exec() {
	local root=$1; shift
	mkdir -p "$root/repo"
	# shellcheck disable=SC2016
	unshare -m --propagation private -- bash -c '
		set -e
		root=$1 repo=$2; shift 2
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount --bind "$repo" "$root/repo"
		exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
	' rl-chroot "$root" "$RL_ROOT" "$@"
}

rl_chroot_ready() {
	local major=$1 suite script root mirror
	read -r suite script < <(rl_chroot_suite "$major")
	root=$RL_CHROOT_CACHE/$suite-pg$major
	mirror=$(rl_debian_mirror)
	if [ ! -f "$root/.rl-ready" ]; then
		rl_install_packages debootstrap
		rl_log "creating the $suite chroot for PostgreSQL $major in $root (once; cached)"
		rm -rf "$root"
		mkdir -p "$RL_CHROOT_CACHE"
		unshare -m --propagation private -- \
			debootstrap --variant=minbase "$suite" "$root" "$mirror" \
			"/usr/share/debootstrap/scripts/$script" >"$RL_CHROOT_CACHE/$suite-pg$major.log" 2>&1 \
			|| { tail -20 "$RL_CHROOT_CACHE/$suite-pg$major.log" >&2; rl_die "debootstrap $suite failed"; }
		# forky's Release file outlives its Valid-Until date.
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99rl-valid-until"
		echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
		cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
		touch "$root/.rl-ready"
	fi
	# The packages the suite needs (scripts/lib.sh, RL_PACKAGES of that
	# major), installed or brought up to date.
	rl_chroot_exec "$root" bash -c "
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >/dev/null
		apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			\$(RL_PG_VERSION=$major bash -c 'source /repo/scripts/lib.sh; echo \${RL_PACKAGES[*]}') >/dev/null
	" || rl_die "could not install the packages in the $suite chroot"
	echo "$root"
}

rl_chroot_run() {
	local major=$1 root; shift
	root=$(rl_chroot_ready "$major") || exit 1
	rl_chroot_exec "$root" "$@"
}
