#!/usr/bin/env bash
# The image's root filesystem but Node and the agent: the Dockerfile's `root` stage runs it on
# the builder's own platform for the target's architecture, so nothing runs under emulation.
#
#   bash scripts/image-rootfs.sh ARCH OUT
#
#   1. Debian's packages that Node 24's official binary links against (libc6, libstdc++6,
#      libgcc-s1, and gcc-12-base, which holds the last two's copyright), and base-files
#      (/etc/os-release, by which scanners know the distribution),
#      for ARCH, at the versions bookworm and bookworm-security hold today: a rebuild picks up
#      Debian's security updates.
#   2. Each unpacked into OUT, and recorded as installed in OUT/var/lib/dpkg/status.d/NAME (the
#      layout distroless uses), so that syft's SBOM and scanners such as Trivy and Grype see
#      them and their versions.
#   3. What the agent never opens removed: glibc's iconv modules (gconv: Node converts text
#      with its own ICU), documentation but each package's copyright, gdb and lintian files.
#   4. Users root and node (1000:1000, the image's default user) with no login shell, and an
#      nsswitch.conf that reads /etc/hosts before DNS, as Debian's does.
#   5. Every file's time set to the epoch: the same packages give the same layer, which a node
#      that has it does not pull again.
set -euo pipefail
arch=${1:?ARCH (amd64 or arm64)} out=${2:?OUT directory}
packages=(base-files libc6 libgcc-s1 libstdc++6 gcc-12-base)

# 1.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Its own sources, whatever the stage's apt has: the suites a rebuild must take updates from.
mkdir -p "$work/parts" "$work/debs" "$work/lists/partial" "$work/cache/archives/partial"
printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' > "$work/sources.list"
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache" -o "APT::Architectures::=$arch" -o APT::Sandbox::User=root)
apt-get "${apt[@]}" update -qq
(cd "$work/debs" && apt-get "${apt[@]}" download -qq "${packages[@]/%/:$arch}")

# 2.
mkdir -p "$out/var/lib/dpkg/status.d"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$out"
  name=$(dpkg-deb -f "$deb" Package)
  dpkg-deb -f "$deb" | awk '{ print } /^Package:/ { print "Status: install ok installed" }' > "$out/var/lib/dpkg/status.d/$name"
  echo "$name $(dpkg-deb -f "$deb" Version) $arch" >&2
done

# 3.
rm -rf "$out"/usr/lib/*-linux-gnu/gconv "$out"/usr/share/gdb "$out"/usr/share/lintian
find "$out/usr/share/doc" -type f ! -name copyright -delete
find "$out/usr/share/doc" -type l ! -xtype d -delete
find "$out/usr/share/doc" -depth -type d -empty -delete

# 4.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnode:x:1000:1000::/home/node:/usr/sbin/nologin\n' > "$out/etc/passwd"
printf 'root:x:0:\nnode:x:1000:\n' > "$out/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$out/etc/nsswitch.conf"
install -d -m 0755 -o 1000 -g 1000 "$out/home/node"

# 5.
find "$out" -exec touch -h -d @0 {} +
