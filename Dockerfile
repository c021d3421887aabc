# idmint's server image, built from this checkout (docs/operations.md, "Containers"):
#
#   docker build -t idmint .
#   docker run --rm -p 8080:8080 -v idmint-data:/app/data idmint
#
# Three stages: `build` compiles src/ to dist/ with the dev dependencies, `deps` installs the
# production dependencies alone, and the final image holds only dist/, bin/, package.json and
# those dependencies, and runs as the unprivileged `node` user of the base image.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency would download a second Node; the image has one.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/clean-dist.mjs scripts/build-dashboard.ts scripts/
COPY src src
RUN npm run build

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    IDMINT_HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY --from=build /src/dist dist
COPY package.json ./
COPY bin bin
# ./data holds the SQLite tags and the static worker's state when no database is configured:
# mount a volume there. It belongs to `node` (uid 1000), the user the server runs as.
RUN mkdir data && chown node:node data
USER node
EXPOSE 8080
# Ready, not just alive: /readyz is 503 while the worker lease is not held or while draining.
# The port is the one the server reads: IDMINT_PORT, else PORT, else 8080.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.IDMINT_PORT || process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form, no shell and no npm in between: node is PID 1 and receives SIGTERM itself, and idmint
# drains on it (a shell would not pass the signal on; npm may not).
ENTRYPOINT ["node", "bin/idmint.js"]
CMD ["serve"]
