#!/usr/bin/env bash
# Builds corral's OCI image with no registry and no Docker: debootstrap, chroot and umoci.
#
# The archive is cached under $CORRAL_IMAGE_CACHE (default ~/.cache/corral/image), named after a
# hash of everything that goes into it, so unchanged inputs never rebuild. The bare Debian root
# filesystem is cached on its own, keyed by release and package list, so a change to corral's
# code does not re-run debootstrap. The last two lines on stdout are IMAGE=... and ARCHIVE=...
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

RELEASE=bookworm
MIRROR=http://deb.debian.org/debian
PACKAGES=python3,python3-venv,ca-certificates
VENV=/opt/corral
HOME_DIR=/home/corral
ID=10001
IMAGE_PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

cache="${CORRAL_IMAGE_CACHE:-$HOME/.cache/corral/image}"
pip="${CORRAL_IMAGE_PIP:-$root/.venv/bin/pip}"

die() {
  echo "image: $*" >&2
  exit 1
}

base_key=$(printf '%s\n' "$RELEASE" "$PACKAGES" | sha256sum | cut -c1-16)
base_tar="$cache/rootfs-$RELEASE-$base_key.tar.gz"

version=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' pyproject.toml | head -n1)
[[ -n $version ]] || die "no version in pyproject.toml"
inputs=$(
  {
    find core operator apiserver agent -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum pyproject.toml tools/image/build.sh
    echo "$base_key"
  } | sha256sum | cut -c1-12
)
tag="$version-$inputs"
image="localhost/corral:$tag"
archive="$cache/corral-$tag.oci.tar"
link="$root/build/corral-image.oci.tar"

publish() {
  mkdir -p "$(dirname "$link")"
  ln -sfn "$archive" "$link"
  echo "LINK=$link"
  echo "IMAGE=$image"
  echo "ARCHIVE=$archive"
}

if [[ -f $archive ]]; then
  echo "image: $image is up to date, nothing to do" >&2
  publish
  exit 0
fi

[[ $(uname -s) == Linux ]] || die "building needs Linux (debootstrap, chroot)"
[[ $(id -u) == 0 ]] || die "building needs root (debootstrap and chroot); run as root"
for tool in debootstrap umoci chroot; do
  command -v "$tool" >/dev/null || die "$tool is missing; 'make image' installs it"
done
[[ -x $pip ]] || die "$pip is missing; run 'make venv' (or set CORRAL_IMAGE_PIP)"

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ -f $archive ]]; then
  echo "image: $image was built by a concurrent run" >&2
  publish
  exit 0
fi

# Holding the lock, any work folder left is from a killed run.
rm -rf "$cache"/work.*
work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS

# Wheels are fetched on the host: only the host's pip has the settings (CA bundle, index) that
# reach PyPI, and the chroot gets no network at all.
echo "image: building wheels for corral and its dependencies" >&2
"$pip" wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" "$root"

if [[ ! -f $base_tar ]]; then
  echo "image: debootstrap $RELEASE ($PACKAGES); about a minute" >&2
  debootstrap --variant=minbase --include="$PACKAGES" "$RELEASE" "$work/debootstrap" "$MIRROR" \
    >"$work/debootstrap.log" || {
    tail -n 20 "$work/debootstrap.log" >&2
    die "debootstrap failed"
  }
  tar --numeric-owner -C "$work/debootstrap" -czf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$work/debootstrap"
fi

layout="$work/layout"
bundle="$work/bundle"
rootfs="$bundle/rootfs"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$bundle"
# Layer 1, the operating system: identical for every corral change, so registries and
# containerd store it once. Whatever is trimmed must go here; a deletion in a later layer
# only hides a file. Skipping files while unpacking is cheaper than deleting them after.
trim=(
  './dev/*' './tmp/*' './var/lib/apt/lists/*' './var/cache/apt/*' './var/cache/debconf/*-old'
  './usr/share/man/*' './usr/share/info/*' './usr/share/locale/*'
  # The runtime provides these; debootstrap copied the host's.
  './etc/resolv.conf' './etc/hostname'
)
tar --numeric-owner --anchored "${trim[@]/#/--exclude=}" -C "$rootfs" -xpzf "$base_tar"
find "$rootfs/var/log" -type f -delete
# Keep only the licences: an image pushed to a registry is a redistribution.
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
echo "corral:x:$ID:$ID:corral:$HOME_DIR:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
echo "corral:x:$ID:" >>"$rootfs/etc/group"
echo "corral:!*::0:99999:7:::" >>"$rootfs/etc/shadow"
echo "corral:!::" >>"$rootfs/etc/gshadow"
install -d -o "$ID" -g "$ID" -m 0755 "$rootfs$HOME_DIR"
# Same base, same layer digest: pin the times this step changed to the base tarball's. Only
# directories and the user files: Debian's .pyc files check their sources' times.
epoch=$(stat -c %Y "$base_tar")
find "$rootfs" -type d -print0 | xargs -0 touch -h -d "@$epoch"
touch -d "@$epoch" "$rootfs"/etc/{passwd,group,shadow,gshadow}
umoci repack --refresh-bundle --image "$layout:$tag" \
  --history.created_by "debootstrap --variant=minbase --include=$PACKAGES $RELEASE; user corral" \
  "$bundle"

# Layer 2, corral: a venv with no pip in it, filled from the host's wheels by the pip wheel
# that python3-venv ships, so nothing reaches the network and no build tool is installed.
cp -r "$work/wheels" "$rootfs/wheels"
in_chroot() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
    chroot "$rootfs" "$@"
}
in_chroot /usr/bin/python3 -m venv --without-pip "$VENV"
pip_wheel=$(cd "$rootfs" && compgen -G 'usr/share/python-wheels/pip-*.whl' | head -n1) ||
  die "no pip wheel from python3-venv in the root filesystem"
in_chroot "$VENV/bin/python" "/$pip_wheel/pip" install --quiet --no-index --no-cache-dir \
  --no-compile --disable-pip-version-check --find-links /wheels corral
rm -rf "$rootfs/wheels" "$rootfs"/tmp/* "$rootfs/root/.cache"
# The root filesystem is read-only at run time: compile now, and let the interpreter trust the
# .pyc files without checking source timestamps.
in_chroot "$VENV/bin/python" -m compileall -q --invalidation-mode unchecked-hash "$VENV/lib"
# Those .pyc files ignore times, so pinning them all makes this layer depend on its content only.
find "$rootfs/opt" "$rootfs/tmp" -print0 | xargs -0 touch -h -d "@$epoch"
touch -d "@$epoch" "$rootfs"
umoci repack --image "$layout:$tag" --history.created_by "corral $version ($inputs) in $VENV" \
  "$bundle"

umoci config --image "$layout:$tag" \
  --config.user "$ID:$ID" \
  --config.env "PATH=$IMAGE_PATH" \
  --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.env PYTHONUNBUFFERED=1 \
  --config.env LANG=C.UTF-8 \
  --config.workingdir "$HOME_DIR" \
  --config.cmd corral-apiserver \
  --config.label "org.opencontainers.image.title=corral" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$inputs" \
  --manifest.annotation "org.opencontainers.image.version=$version" \
  --history.created_by "user $ID, PATH, cmd corral-apiserver (entry points: corral-operator, corral-agent)"
umoci gc --layout "$layout"
tar -C "$layout" -cf "$archive.tmp" .
mv "$archive.tmp" "$archive"
# Every code change adds an archive of about 60 MB: keep the five newest.
find "$cache" -maxdepth 1 -name 'corral-*.oci.tar' -printf '%T@ %p\n' | sort -rn | tail -n +6 |
  cut -d' ' -f2- | xargs -r -d '\n' rm -f --

echo "image: built $image in $((SECONDS - started)) s, $(du -h "$archive" | cut -f1)" >&2
publish
