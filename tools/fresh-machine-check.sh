#!/usr/bin/env bash
# fresh-machine-check.sh: proves that README.md's Quick start works on a bare Debian 12.
#
# A package that the development machine happens to have can hide a missing install step
# (oneDNN's CMake config needs the OpenCL headers, which Debian only recommends). This script
# starts from nothing instead:
#
#   1. debootstrap    a bare Debian 12 (bookworm, amd64) root in a temporary folder, with
#                     variant minbase: essential and required packages plus apt, which is
#                     what the Debian 12 container image is built from. Its apt sources are
#                     those of that image (bookworm, bookworm-updates, bookworm-security);
#                     ca-certificates is not added because the mirror is plain http.
#   2. clone          a clean `git clone` of HEAD into /root/dprun in the root. Uncommitted
#                     and untracked changes are deliberately left out.
#   3. chroot-setup   mounts /proc, /sys and /dev in the root and copies /etc/resolv.conf.
#   4. readme-run     the Quick start's first command, as written in README.md.
#   5. readme-test    the Quick start's second command, as written in README.md.
#
# Both commands are read from README.md's "Quick start" section of the cloned commit, so the
# check follows the README. They run as root (tools/install-deps.sh calls apt-get without
# sudo) in a clean environment: nothing of this machine's environment leaks in.
#
# The CUDA toolkit lives in /usr/local/cuda on the project's machines, but a bare root does
# not have it: the build inside must succeed without CUDA, and `--devices all` falls back to
# one CPU device per core. That is the expected behaviour, not a skipped check.
#
# The last line printed is `fresh-machine-check: PASS (...)` or
# `fresh-machine-check: FAIL: <step> ...`, with the elapsed time of each step; the exit status
# is 0 or 1. Every exit path, Ctrl-C included, unmounts what was mounted and deletes the root
# (unless --keep).
#
# Environment:
#   FRESH_CHECK_MIRROR           Debian mirror (default http://deb.debian.org/debian)
#   FRESH_CHECK_SECURITY_MIRROR  security mirror (default http://deb.debian.org/debian-security)
#   FRESH_CHECK_TMPDIR           where the temporary root is made (default /var/tmp)
#   FRESH_CHECK_CACHE            optional cache folder: keeps debootstrap's .debs as a tarball
#                                and apt's downloaded .debs, so later runs download less.
#                                Unset (the default), every run downloads everything.
# shellcheck disable=SC2317  # the cleanup functions are called from traps
set -uo pipefail

prog=fresh-machine-check
mirror=${FRESH_CHECK_MIRROR:-http://deb.debian.org/debian}
security_mirror=${FRESH_CHECK_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
tmp_parent=${FRESH_CHECK_TMPDIR:-/var/tmp}
cache=${FRESH_CHECK_CACHE:-}
suite=bookworm
arch=amd64
variant=minbase

usage() {
  cat <<EOF
Usage: tools/fresh-machine-check.sh [--keep] [--help]

Builds a bare Debian 12 root with debootstrap (variant $variant), clones HEAD into it and
runs README.md's two Quick start commands inside a chroot: install the dependencies, build,
run models/cnn.onnx on every device, then build and run ctest. Proves that a fresh machine
needs nothing beyond what the README says. Takes about 9 minutes on 2 idle cores, 20 or
more on busy ones. Must run as root. Uncommitted changes are not part of the check:
commit first.

Options:
  --keep    keep the root for inspection (printed at the end); mounts are still removed
  --help    this text

Environment: FRESH_CHECK_MIRROR, FRESH_CHECK_SECURITY_MIRROR, FRESH_CHECK_TMPDIR,
FRESH_CHECK_CACHE (a folder caching downloaded packages between runs; off by default so
that a run really starts from nothing). See the comment at the top of the script.

The last line is "$prog: PASS (...)" or "$prog: FAIL: <step> ...", exit status 0 or 1.
EOF
}

keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# ---- state shared with the exit trap -------------------------------------------------------
start_all=$(date +%s)
step=""              # the step running now; named in the FAIL line
fail_detail=""       # why it failed
passed=0
timings=()           # "name 1m02s"
work=""              # temporary folder; the root is $work/root
root=""
mounts=()            # mount points, in the order they were mounted
child=""             # pid (and process group) of the running step's command
step_t0=""           # when the running step started
sha=""

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
say() { printf '%s: %s\n' "$prog" "$*"; }

# Any mount below the work folder, from the kernel's own table (deepest last).
mounts_below() {
  [ -n "$work" ] || return 0
  awk -v p="$work/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts
}

# Processes whose root directory is the chroot: everything the steps started inside it.
chroot_pids() {
  [ -n "$root" ] || return 0
  # One find rather than a readlink per process: forks are slow on a loaded machine.
  find /proc -mindepth 2 -maxdepth 2 -name root -printf '%h\t%l\n' 2>/dev/null |
    awk -F '\t' -v r="$root" '$2 == r && $1 ~ /^\/proc\/[0-9]+$/ { print substr($1, 7) }'
}

stop_children() {
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM -- "-$child" 2>/dev/null
  fi
  local pids
  pids=$(chroot_pids)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    sleep 2
    pids=$(chroot_pids)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  fi
  [ -z "$child" ] || wait "$child" 2>/dev/null
  child=""
}

# Unmounts everything below the work folder; returns nonzero if anything is left mounted.
unmount_all() {
  local i m left
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[i]}
    grep -qF " $m " /proc/self/mounts || continue
    umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null || true
  done
  # Anything else below the work folder (mounted by a package script, say), deepest first.
  left=$(mounts_below | sort -r)
  for m in $left; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  left=$(mounts_below)
  if [ -n "$left" ]; then
    say "still mounted after unmounting:" >&2
    printf '  %s\n' "$left" >&2
    return 1
  fi
  return 0
}

cleanup() {
  local ok=0
  stop_children
  if [ -n "$work" ]; then
    if ! unmount_all; then
      ok=1
    elif [ "$keep" -eq 1 ]; then
      say "kept the root (--keep): $root   (enter it: chroot $root /bin/bash;"
      say "  mount /proc, /sys and /dev there first if a command needs them; remove: rm -rf $work)"
    else
      # --one-file-system: never follow into a mount, even if one were missed.
      rm -rf --one-file-system "$work" || ok=1
      [ ! -e "$work" ] || ok=1
    fi
  fi
  return "$ok"
}

on_exit() {
  local rc=$? summary total
  trap - EXIT INT TERM HUP
  if ! cleanup; then
    passed=0
    step=${step:-cleanup}
    fail_detail="${fail_detail:+$fail_detail; }cleanup failed, root left in $work"
  fi
  total=$(fmt_secs $(($(date +%s) - start_all)))
  summary=$(printf '%s, ' "${timings[@]}")
  summary=${summary%, }
  if [ "$passed" -eq 1 ] && [ "$rc" -eq 0 ]; then
    echo "$prog: PASS (commit ${sha:0:12}; ${summary}; total $total)"
    exit 0
  fi
  echo "$prog: FAIL: ${step:-setup}${fail_detail:+: $fail_detail} (${summary:+$summary; }total $total)"
  exit 1
}

on_signal() {
  fail_detail="interrupted by SIG$1"
  [ -z "$step_t0" ] || timings+=("$step $(fmt_secs $(($(date +%s) - step_t0)))")
  stop_children
  exit 1
}

trap on_exit EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

fail() { fail_detail="$*"; exit 1; }

# Runs one step's command in the background, in a process group of its own (set -m), and
# waits, so that a signal is handled at once rather than after the command ends, and stops the
# whole group. Records the step's elapsed time.
run_step() {
  local name=$1 rc elapsed
  shift
  step=$name
  say "==> $name"
  step_t0=$(date +%s)
  set -m
  "$@" </dev/null &
  child=$!
  set +m
  wait "$child"
  rc=$?
  child=""
  elapsed=$(fmt_secs $(($(date +%s) - step_t0)))
  step_t0=""
  timings+=("$name $elapsed")
  say "<== $name: exit status $rc after $elapsed"
  [ "$rc" -eq 0 ] || fail "exit status $rc"
}

# ---- preconditions -------------------------------------------------------------------------
step=preconditions
if [ "$(id -u)" -ne 0 ]; then
  fail "must run as root: debootstrap, mount and chroot need root (try: sudo $0)"
fi
for tool in debootstrap git chroot mount umount awk; do
  command -v "$tool" >/dev/null || fail "'$tool' is not installed (apt-get install $tool)"
done
host_arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
case "$host_arch" in
  amd64 | x86_64) ;;
  *) fail "this machine is $host_arch; the check builds an amd64 root and runs it natively" ;;
esac

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel 2>/dev/null) ||
  fail "$(dirname "$0")/.. is not in a git repository"
sha=$(git -C "$repo" rev-parse HEAD) || fail "cannot resolve HEAD in $repo"
branch=$(git -C "$repo" symbolic-ref -q --short HEAD || true)
say "checking commit $sha${branch:+ (branch $branch)} of $repo"
say "a clean clone of HEAD is checked: uncommitted and untracked changes are NOT included"
changes=$(git -C "$repo" status --porcelain | wc -l)
[ "$changes" -eq 0 ] || say "note: $changes uncommitted or untracked paths in $repo are left out"

# The Quick start's commands: the ```sh blocks of README.md's "## Quick start" section, read
# from the commit being checked.
step=readme
readme=$(git -C "$repo" show "$sha:README.md") || fail "no README.md in $sha"
mapfile -d '' -t quick < <(printf '%s\n' "$readme" | awk '
  /^## / { in_section = ($0 ~ /^## Quick start/); next }
  in_section && /^```sh[[:space:]]*$/ { in_block = 1; block = ""; next }
  in_section && in_block && /^```[[:space:]]*$/ { in_block = 0; printf "%s%c", block, 0; next }
  in_section && in_block { block = block (block == "" ? "" : "\n") $0 }')
[ "${#quick[@]}" -eq 2 ] ||
  fail "README.md's Quick start should have exactly 2 \`\`\`sh blocks, found ${#quick[@]}"
case "${quick[0]}" in *"models/cnn.onnx"*) ;; *)
  fail "README.md's first Quick start command does not run models/cnn.onnx" ;;
esac
case "${quick[1]}" in *ctest*) ;; *)
  fail "README.md's second Quick start command does not run ctest" ;;
esac
say "Quick start command 1: ${quick[0]}"
say "Quick start command 2: ${quick[1]}"

if [ -n "$cache" ]; then
  mkdir -p "$cache/apt-archives/partial" || fail "cannot create cache folder $cache"
  cache=$(cd "$cache" && pwd)
  say "using the package cache $cache (FRESH_CHECK_CACHE); unset it to download everything"
fi

step=setup
mkdir -p "$tmp_parent" || fail "cannot create $tmp_parent"
work=$(mktemp -d "$tmp_parent/$prog.XXXXXX") || fail "cannot create a folder in $tmp_parent"
work=$(cd "$work" && pwd -P)
root=$work/root
say "root: $root"

# ---- 1. debootstrap ------------------------------------------------------------------------
do_debootstrap() {
  local args=(--variant="$variant" --arch="$arch")
  if [ -n "$cache" ]; then
    local tarball=$cache/debootstrap-$suite-$variant-$arch.tgz
    if [ ! -s "$tarball" ]; then
      debootstrap "${args[@]}" --make-tarball="$tarball.tmp" "$suite" "$work/tarball-staging" \
        "$mirror" && mv "$tarball.tmp" "$tarball" || return 1
      rm -rf --one-file-system "$work/tarball-staging"
    fi
    args+=(--unpack-tarball="$tarball")
  fi
  debootstrap "${args[@]}" "$suite" "$root" "$mirror" || {
    [ ! -f "$root/debootstrap/debootstrap.log" ] || tail -n 30 "$root/debootstrap/debootstrap.log"
    return 1
  }
  # The apt sources of the Debian 12 container image, on the same mirror.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # As in the container image: packages never start services, which would run on this
  # machine and keep the root busy.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
}
run_step debootstrap do_debootstrap

# ---- 2. clone ------------------------------------------------------------------------------
do_clone() {
  local dest=$root/root/dprun
  git clone --quiet --no-hardlinks --no-checkout "$repo" "$dest" || return 1
  if [ -n "$branch" ]; then
    git -C "$dest" checkout --quiet -B "$branch" "$sha" || return 1
  else
    git -C "$dest" checkout --quiet --detach "$sha" || return 1
  fi
  [ "$(git -C "$dest" rev-parse HEAD)" = "$sha" ] || { echo "clone is not at $sha" >&2; return 1; }
  [ -z "$(git -C "$dest" status --porcelain)" ] || { echo "clone is not clean" >&2; return 1; }
}
run_step clone do_clone

# ---- 3. chroot-setup -----------------------------------------------------------------------
mount_in_root() {  # mount_in_root TARGET ARGS...
  local target=$root/$1
  shift
  mkdir -p "$target" || return 1
  mount "$@" "$target" || return 1
  mounts+=("$target")
}
do_chroot_setup() {
  mount_in_root proc -t proc proc || return 1
  mount_in_root sys --rbind /sys && mount --make-rslave "$root/sys" || return 1
  mount_in_root dev --rbind /dev && mount --make-rslave "$root/dev" || return 1
  if [ -n "$cache" ]; then
    mount_in_root var/cache/apt/archives --bind "$cache/apt-archives" || return 1
  fi
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" || return 1
}
# Mounts must be recorded in this shell for the trap, so this step runs in the foreground.
step=chroot-setup
say "==> chroot-setup"
t0=$(date +%s)
do_chroot_setup || fail "mounting /proc, /sys or /dev, or copying /etc/resolv.conf"
timings+=("chroot-setup $(fmt_secs $(($(date +%s) - t0)))")

# ---- 4, 5. the README's commands -----------------------------------------------------------
in_root() {  # runs a shell command in /root/dprun inside the root, as root, in a clean env
  chroot "$root" /usr/bin/env -i \
    HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM="${TERM:-dumb}" \
    /bin/bash -c "cd /root/dprun && $1"
}
run_step readme-run in_root "${quick[0]}"
run_step readme-test in_root "${quick[1]}"

step=cleanup
passed=1
exit 0
