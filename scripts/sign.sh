#!/usr/bin/env bash
# Every signature a release makes, with one set of cosign flags (release.sh calls it; a test
# runs its keyless form against the pinned cosign). cosign must be on PATH.
#
#   sign.sh public-key FILE              the key's public half into FILE (keyless: nothing)
#   sign.sh image REF IDENTITY           signs the image REF (a digest; an index and each of
#                                        its platform images) in a registry on
#                                        loopback; the signature names IDENTITY, the
#                                        repository users pull (podman's matchRepository
#                                        and remapIdentity compare against it), not REF's
#   sign.sh attest TYPE PREDICATE REF    a signed in-toto attestation of REF (cosign's TYPE:
#                                        slsaprovenance1, cyclonedx, ...)
#   sign.sh blob FILE BUNDLE             FILE's signature bundle
#
# OWNERREFS_SIGN=key (the default): $COSIGN_KEY (with $COSIGN_PASSWORD), else a key pair made
# once in ~/.config/ownerrefs/; nothing leaves the machine. OWNERREFS_SIGN=keyless: the
# ambient OIDC identity (the hosted workflow's), a Fulcio certificate, and Sigstore's public
# log. Image signatures and attestations are cosign's classic tags (.sig, .att) beside the
# image, not OCI 1.1 referrers: `cosign save` carries them into the release's image layout
# and `cosign load` into the user's registry.
set -euo pipefail
die() { echo "sign: $*" >&2; exit 1; }

flags=()
case ${OWNERREFS_SIGN:-key} in
  key)
    if [[ -z ${COSIGN_KEY:-} ]]; then
      keydir=$HOME/.config/ownerrefs
      if [[ ! -f $keydir/cosign.key ]]; then
        mkdir -p "$keydir" && chmod 700 "$keydir"
        (cd "$keydir" && COSIGN_PASSWORD='' cosign generate-key-pair >/dev/null)
        echo "[sign] made a signing key pair in $keydir (set COSIGN_KEY to use your own)" >&2
      fi
      export COSIGN_KEY=$keydir/cosign.key COSIGN_PASSWORD=${COSIGN_PASSWORD:-}
    fi
    # No public services: no transparency log, no signing config fetched from Sigstore's TUF.
    flags=(--key "$COSIGN_KEY" --tlog-upload=false --use-signing-config=false) ;;
  keyless)
    # Fulcio and Rekor at cosign's defaults, named by flags rather than by a signing config
    # fetched at run time: cosign refuses the classic signature format with a signing config.
    flags=(--use-signing-config=false) ;;
  *) die "OWNERREFS_SIGN=$OWNERREFS_SIGN: key or keyless" ;;
esac
quiet() { grep -v -e 'has been deprecated' -e '^tlog entry created' -e '^Pushing signature' >&2 || true; }

cmd=${1:-}
case $cmd in
  public-key)
    [[ ${OWNERREFS_SIGN:-key} == key ]] || exit 0
    cosign public-key --key "$COSIGN_KEY" > "$2" ;;
  image)
    [[ $# -eq 3 && $2 == *@sha256:* ]] || die "usage: sign.sh image REF@sha256:DIGEST IDENTITY"
    # --recursive: an index's platform images too, each with its own signature: podman and
    # CRI-O verify the image they pull for their platform, not the index.
    cosign sign --yes "${flags[@]}" --new-bundle-format=false --allow-insecure-registry --recursive \
      --sign-container-identity "$3" "$2" 2>&1 | quiet; exit "${PIPESTATUS[0]}" ;;
  attest)
    [[ $# -eq 4 && $4 == *@sha256:* ]] || die "usage: sign.sh attest TYPE PREDICATE REF@sha256:DIGEST"
    cosign attest --yes "${flags[@]}" --new-bundle-format=false --allow-insecure-registry \
      --type "$2" --predicate "$3" "$4" 2>&1 | quiet; exit "${PIPESTATUS[0]}" ;;
  blob)
    [[ $# -eq 3 ]] || die "usage: sign.sh blob FILE BUNDLE"
    out=$(cosign sign-blob --yes "${flags[@]}" --bundle "$3" "$2" 2>&1) || die "cosign sign-blob $2: $out" ;;
  *) die "usage: sign.sh public-key|image|attest|blob ..." ;;
esac
