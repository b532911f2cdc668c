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
# made inside a private mount namespace (unshare -m) where the machine
# allows one, else undone by a trap (rl_private_mounts): nothing stays
# mounted when the command ends.  The caller runs rl_chroot_probe first:
# where nothing can be mounted, it says why and the major cannot run.

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

# How this machine keeps a chroot's mounts to the run that made them
# (rl_chroot_probe sets RL_CHROOT_MODE, tried in this order):
#   private    unshare -m --propagation private: a mount namespace whose
#              mounts propagate nowhere and go when its last process ends
#              (a host, a container with CAP_SYS_ADMIN)
#   self-bind  / is no mount point (a plain chroot), so unshare cannot
#              change its propagation ("Invalid argument"): the chroot's
#              directory is bound onto itself here, then, in a namespace of
#              its own (unshare -m --propagation unchanged), made private
#              before anything is mounted under it; the bind is undone when
#              the command ends
#   plain      no mount namespace can be made, but mounting works: the
#              chroot's directory is bound onto itself here and everything
#              is mounted under that bind, which a trap detaches (umount -l,
#              the whole tree at once) however the command ends
# Where none works, RL_CHROOT_MODE is none and RL_CHROOT_WHY says why.
# RL_CHROOT_MODE set beforehand is used as it is (to try a fallback where
# a better mode works).
rl_chroot_probe() {
	local dir out first="" last=""
	[ -z "${RL_CHROOT_MODE:-}" ] || [ "$RL_CHROOT_MODE" = none ] || return 0
	dir=$(mktemp -d /tmp/rl-probe.XXXXXX)
	mkdir "$dir/proc"
	for RL_CHROOT_MODE in private self-bind plain; do
		if out=$(rl_private_mounts "$dir" mount -t proc proc "$dir/proc" 2>&1); then
			rm -r "$dir"
			export RL_CHROOT_MODE
			return 0
		fi
		last=$(printf '%s\n' "$out" | grep -v -e '^[[:space:]]*$' -e 'dmesg(1)' | head -1)
		[ -n "$first" ] || first=$last
	done
	rm -r "$dir"
	RL_CHROOT_MODE=none
	RL_CHROOT_WHY="cannot mount /proc and /dev in the chroot: $last"
	[ "$first" = "$last" ] || RL_CHROOT_WHY+=" (no mount namespace either: $first)"
	export RL_CHROOT_MODE RL_CHROOT_WHY
	return 1
}

# rl_private_mounts DIR CMD...: CMD, whose mounts under DIR (made by CMD
# itself) end with it and reach no other mount namespace, in the way
# RL_CHROOT_MODE names.  A subshell: its traps are its own.
rl_private_mounts() (
	local dir=$1; shift
	case $RL_CHROOT_MODE in
		private)
			exec unshare -m --propagation private -- "$@" ;;
		self-bind)
			unshare -m --propagation unchanged -- true || exit
			mount --bind "$dir" "$dir" || exit
			trap 'umount "$dir" 2>/dev/null || umount -l "$dir"' EXIT
			trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP
			# shellcheck disable=SC2016
			unshare -m --propagation unchanged -- \
				sh -c 'mount --make-rprivate "$1" && shift && exec "$@"' rl-private "$dir" "$@" ;;
		plain)
			mount --bind "$dir" "$dir" || exit
			trap 'umount -l "$dir"' EXIT
			trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP
			"$@" ;;
		*) echo "no way to mount here: ${RL_CHROOT_WHY:-rl_chroot_probe was not run}" >&2; exit 1 ;;
	esac
)

# rl_chroot_exec ROOT CMD...: CMD in ROOT with /proc, /dev and the
# repository mounted, none of it left mounted afterwards.  /dev is a slave
# of the host's: unmounting its copy never unmounts the host's /dev/pts.
rl_chroot_exec() {
	local root=$1; shift
	mkdir -p "$root/repo"
	# shellcheck disable=SC2016
	rl_private_mounts "$root" bash -c '
		set -e
		root=$1 repo=$2; shift 2
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount --make-rslave "$root/dev"
		mount --bind "$repo" "$root/repo"
		exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
	' rl-chroot "$root" "$RL_ROOT" "$@"
}

rl_chroot_ready() {
	local major=$1 spec suite script root mirror
	spec=$(rl_chroot_suite "$major") || exit 1
	read -r suite script <<<"$spec"
	root=$RL_CHROOT_CACHE/$suite-pg$major
	mirror=$(rl_debian_mirror)
	if [ ! -f "$root/.rl-ready" ]; then
		rl_install_packages debootstrap
		rl_log "creating the $suite chroot for PostgreSQL $major in $root (once; cached)"
		rm -rf "$root"
		mkdir -p "$root"
		rl_private_mounts "$root" \
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
