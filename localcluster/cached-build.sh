# Sourced by localcluster/controlplane/build.sh and localcluster/csi/build.sh: the scaffolding of a build
# whose result is a directory of binaries cached under a versioned name.
#
# The caller sets `bins` (the binary names) and `log()`, then:
#   cached_build_begin CACHE_ROOT DIR   # prints DIR and exits 0 on a cache hit; else sets $tmp
#   ... go build -o "$tmp/" ...
#   cached_build_finish DIR             # verifies, renames $tmp into place, prints DIR
# Builds go into a sibling temp dir renamed into place at the end, so an interrupted build
# never leaves a directory that looks complete; temp dirs of killed builds are reaped.

has_all() {
  local b
  for b in "${bins[@]}"; do [[ -x "$1/$b" || ( $b == *.tar && -f "$1/$b" ) ]] || return 1; done
}

cached_build_begin() {
  local cache_root=$1 dir=$2
  if has_all "$dir"; then
    log "cache hit: $dir"
    echo "$dir"
    exit 0
  fi
  command -v go >/dev/null || { log "go is not on PATH; cannot build $dir"; exit 1; }
  mkdir -p "$cache_root"
  # A live build is never this old.
  find "$cache_root" -maxdepth 1 -name '.building.*' -mmin +180 -exec rm -rf {} + 2>/dev/null || true
  tmp=$(mktemp -d "$cache_root/.building.XXXXXX")
  # A cold build runs for minutes: say it is alive every 30 s, on stderr like the rest.
  ( start=$SECONDS; while sleep 30; do log "still building ($((SECONDS - start)) s)"; done ) >/dev/null &
  ticker=$!
  trap 'kill "$ticker" 2>/dev/null; rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP
}

cached_build_finish() {
  local dir=$1
  has_all "$tmp" || { log "build finished but binaries are missing in $tmp"; exit 1; }
  chmod 0755 "$tmp"
  # A partial dir can only come from manual tinkering; move it aside first.
  if [[ -e "$dir" ]] && ! has_all "$dir"; then
    rm -rf "$dir.stale"
    mv -T "$dir" "$dir.stale"
    rm -rf "$dir.stale"
  fi
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then
    # A concurrent build won the rename; its result is just as good.
    has_all "$dir" || { log "could not install $dir"; exit 1; }
  fi
  log "installed $dir"
  echo "$dir"
}
