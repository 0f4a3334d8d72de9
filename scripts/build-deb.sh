#!/bin/sh
# Builds the Debian package sandgate_VERSION_ARCH.deb into OUTDIR (default
# build-deb/) with dpkg-buildpackage -us -uc -b. dpkg-buildpackage writes
# its results beside the source tree, so the sources are copied into
# OUTDIR/sandgate-VERSION/ first: nothing is written next to the checkout.
# Prints the .deb's path.
#
# Only what git tracks is copied (as it is in the working tree; a file
# deleted there is left out): never an untracked file, so no key or database
# that `make run` left in certs/ or var/ can reach the package. A new source
# file must be `git add`ed to be built. Outside a git checkout (a release
# tarball) the tree is copied without build*/, var/, certs/ but its README,
# and *.db*. With --sources-only the tree is copied and its path printed,
# without building.
set -eu

sources_only=0
if [ "${1:-}" = "--sources-only" ]; then
	sources_only=1
	shift
fi

src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
cmake_version=$(sed -n 's/^project(sandgate VERSION \([0-9.]*\).*/\1/p' \
	"$src/CMakeLists.txt")
if [ "$version" != "$cmake_version" ]; then
	echo "sandgate: debian/changelog says $version, CMakeLists.txt $cmake_version:" \
		"add a changelog entry (dch -v $cmake_version)" >&2
	exit 1
fi

tree="$out/sandgate-$version"
rm -rf "$tree"
mkdir -p "$tree"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null --no-recursion -T - -cf -) | tar -C "$tree" -xf -
else
	(cd "$src" && tar --exclude='./build*' --exclude=./.git \
		--exclude=./var --exclude='./certs/*' --exclude='*.db' \
		--exclude='*.db-wal' --exclude='*.db-shm' -cf - . &&
		tar -cf - certs/README.md) | tar -C "$tree" -xif -
fi
if [ "$sources_only" = 1 ]; then
	echo "$tree"
	exit 0
fi

rm -f "$out"/sandgate_"$version"_* "$out"/sandgate-dbgsym_"$version"_*
# parallel=2: the machines this is built on are shared (README, Tests).
(cd "$tree" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=2}" \
	dpkg-buildpackage -us -uc -b >"$out/build.log" 2>&1) || {
	tail -n 40 "$out/build.log" >&2
	echo "sandgate: dpkg-buildpackage failed; the whole log: $out/build.log" >&2
	exit 1
}
deb="$out/sandgate_${version}_${arch}.deb"
[ -f "$deb" ] || { echo "sandgate: no $deb after the build" >&2; exit 1; }
echo "$deb"
