# syntax=docker/dockerfile:1
# One Dockerfile for every architecture (linux/amd64, linux/arm64). The image is FROM scratch:
# Node 24's official binary, the Debian packages it links against, and the compiled agent with
# its production dependencies; no shell, no package manager, no npm. Every RUN is in a stage on
# the builder's own platform, so building for another architecture needs no emulation.
#
# NODE_IMAGE runs those stages; NODE_TARGET_IMAGE gives the target's Node binary. Both default
# to the published multi-arch image; localcluster/image/build.sh passes ones it makes, for a
# machine with no registry.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG NODE_TARGET_IMAGE=node:24-bookworm-slim

# 1. Build: compile TypeScript with the dev dependencies, then keep production ones only, less
# what Node never loads from them: type declarations (@types, *.d.ts), TypeScript sources,
# source maps, Markdown but licences, and the packages' tests, docs, examples and benchmarks.
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency only provides Node 24 for local scripts.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY agent ./agent
COPY projections ./projections
# CSI mode loads its generated codec (agent/files/csi/generated/codec.js) from beside the compiled code.
RUN npx tsc -p tsconfig.build.json && cp -R agent/files/csi/generated dist/agent/files/csi/ && npm prune --omit=dev --ignore-scripts \
 && rm -rf node_modules/@types \
 && find node_modules -type d \( -name test -o -name tests -o -name docs -o -name example -o -name examples -o -name benchmarks \) -prune -exec rm -rf {} + \
 && find node_modules -type f \( -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.map' -o -name '*.md' \) ! -iname 'licen[cs]e*' -delete
# The app's tree: main.js names the image's node in its #! line (the image has no env to find
# it), executable, and is `ownerrefs-agent` on PATH, for `kubectl exec ds/ownerrefs-agent --
# ownerrefs-agent doctor` (or render, inject) as the docs show.
RUN mkdir -p /out/app /out/usr/local/bin && cp -R package.json node_modules dist /out/app/ \
 && sed -i '1s|^#!/usr/bin/env node$|#!/usr/local/bin/node|' /out/app/dist/agent/main.js && grep -qx '#!/usr/local/bin/node' /out/app/dist/agent/main.js \
 && chmod 755 /out/app/dist/agent/main.js && ln -s /app/dist/agent/main.js /out/usr/local/bin/ownerrefs-agent

# 2. The target's Node, as its official image ships it.
FROM --platform=$TARGETPLATFORM ${NODE_TARGET_IMAGE} AS node

# 3. The root filesystem but the app (scripts/image-rootfs.sh says what and why), and Node
# stripped of its symbol table (18 MB: V8's and Node's own JavaScript stacks are unaffected).
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS root
ARG TARGETARCH
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils-multiarch >/dev/null
COPY scripts/image-rootfs.sh /usr/local/bin/image-rootfs
RUN bash /usr/local/bin/image-rootfs "$TARGETARCH" /rootfs
COPY --from=node /usr/local/bin/node /node/usr/local/bin/node
# The binary must be the target's: a builder whose local image is of another platform fails here.
# Its time set to the epoch as the root's are: the same Node gives the same layer.
RUN strip /node/usr/local/bin/node && find /node -exec touch -h -d @0 {} + && readelf -h /node/usr/local/bin/node | grep -q "Machine: *$([ "$TARGETARCH" = arm64 ] && echo AArch64 || echo 'Advanced Micro Devices X86-64')"

# 4. Runtime: three layers, each changing on its own: Debian's security updates, Node, the agent.
FROM scratch
COPY --from=root /rootfs/ /
COPY --from=root /node/ /
COPY --from=build /out/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENV NODE_ENV=production
# agent/config.ts AGENT_ENV: two malloc arenas keep RSS flat (a test keeps the two in step).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
# Runs as uid 0 with every capability dropped (set in daemonset.yaml): root ownership is
# needed to traverse the kubelet's pods directory; see SECURITY.md. Image default stays
# non-root so the image is safe when run anywhere else.
USER node
EXPOSE 8080
# V8 flags: agent/config.ts NODE_FLAGS (a test keeps the two in step).
ENTRYPOINT ["node", "--max-semi-space-size=1", "--no-opt", "--no-maglev", "--memory-saver-mode", "dist/agent/main.js"]
CMD ["run"]
