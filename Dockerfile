# Production image: build with dev dependencies, run with production ones only. Node 22 LTS: Node 20 reached its end
# of life on 2026-04-30 (no more security releases).
FROM node:22.23-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
COPY scripts ./scripts
# The vendor emulator (the demo's and the bench's fake vendors; its fixtures hold strings in the shapes of live
# Shopify and Amazon credentials, which image secret scanners report) and the bench are not part of the gateway.
RUN npm run build && rm -rf dist/src/emulator dist/bench

FROM node:22.23-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# The npm cache (tens of MB) is no part of what runs.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY scripts ./scripts
# The embedded PostgreSQL (no DATABASE_URL) keeps its data in DATA_DIR (/app/.data): the node user must own it.
RUN mkdir -p /app/.data && chown node:node /app/.data
# The node user by number (1000 in the official image): Kubernetes' runAsNonRoot cannot check a user name.
USER 1000:1000
EXPOSE 3000
# The port the gateway listens on: PORT (spaces around it ignored, as the configuration reads it), 3000 by default.
# Start-up may wait 30 s for the database and then for migrations (or another replica's): failures in the first
# 60 s do not count, so a slow start is not reported unhealthy.
HEALTHCHECK --interval=10s --timeout=3s --retries=5 --start-period=60s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+((process.env.PORT||'').trim()||3000)+'/readyz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
# Node as PID 1 ignores a signal it has no handler for: the gateway installs its stop handlers before it loads its
# modules (src/stop-signals.ts), so a SIGTERM in the first seconds of start-up stops it too (Kubernetes has no --init).
CMD ["node", "dist/src/main.js"]
