# syntax=docker/dockerfile:1
# One Dockerfile for every architecture (linux/amd64, linux/arm64): nothing in the image is
# native but `node`, so the build stage runs on the builder's own platform and the final stage
# takes the target's base. BASE is that base: the default names the published multi-arch one;
# localcluster/image/build.sh passes the one it makes for a platform with no registry here.
ARG BASE=node:24-bookworm-slim

# Build: compile TypeScript with the dev dependencies, then keep production ones only.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency only provides Node 24 for local scripts;
# the base image already is Node 24.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY agent ./agent
COPY projections ./projections
# CSI mode loads its generated codec (agent/files/csi/generated/codec.js) from beside the compiled code.
# main.js keeps its `#!/usr/bin/env node` line; executable, it is `ownerrefs-agent` on PATH below.
RUN npx tsc -p tsconfig.build.json && cp -R agent/files/csi/generated dist/agent/files/csi/ && chmod 755 dist/agent/main.js && npm prune --omit=dev --ignore-scripts

# Runtime: Node 24, production dependencies and compiled JavaScript only.
FROM --platform=$TARGETPLATFORM ${BASE}
ENV NODE_ENV=production
# agent/config.ts AGENT_ENV: two malloc arenas keep RSS flat (a test keeps the two in step).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# `kubectl exec ds/ownerrefs-agent -- ownerrefs-agent doctor` (or render, inject) as the docs show.
RUN ln -s /app/dist/agent/main.js /usr/local/bin/ownerrefs-agent
# Runs as uid 0 with every capability dropped (set in daemonset.yaml): root ownership is
# needed to traverse the kubelet's pods directory; see SECURITY.md. Image default stays
# non-root so the image is safe when run anywhere else.
USER node
EXPOSE 8080
# V8 flags: agent/config.ts NODE_FLAGS (a test keeps the two in step).
ENTRYPOINT ["node", "--max-semi-space-size=1", "--no-opt", "--no-maglev", "--memory-saver-mode", "dist/agent/main.js"]
CMD ["run"]
